"""A fake OpenAI Responses upstream (ASGI): POST /v1/responses, stream or not, with the real event sequence.

Usage:
    fake = FakeResponses()
    async with serve_app(fake) as base_url:   # or serve_app_in_thread(fake)
        ... a tier with executor: openai, wire_api: responses, base_url: base_url + "/v1" ...
    fake.requests[-1].body, fake.requests[-1].headers

Behaviour by `model` (unknown names behave as "good"), or popped from `fake.script`:
    good      a reasoning item first (encrypted_content when `include` asks for
              "reasoning.encrypted_content"), then a message quoting the last user text
    tools     a call to the first function or custom tool offered (top-level `tools`, then `additional_tools`
              items; inside a namespace, its first tool, the call naming the namespace): `function_call` with
              arguments filled from its required properties, or `custom_tool_call` (freeform input) for a
              custom tool; when the last input item is a tool output: a message quoting it
    length    a message, then status "incomplete" (max_output_tokens)
    failed    stream: created, in_progress, then response.failed; whole: 500
    echo_secret  a model repeating the placeholders daari put in its prompt (REDACTED_<KIND>_<hex>): a message
              naming them and a `function_call` to the first tool whose command holds them all; its stream sends
              text and arguments in 7-character deltas, so placeholders cross events
    error400  HTTP 400 invalid_request_error
    truncate  stream: created and a text delta, then the body ends without response.completed
    hang      stream: created, in_progress and the first item's first events, then nothing until the
              client goes away

POST /v1/responses/compact answers a compaction (the user messages kept, one opaque `compaction` item);
POST /v1/responses/input_tokens a count (7 per input item); `fake.sent` holds the last such answer's bytes.

`active_streams` counts streams being sent, `closed_streams` those that ended (finished, or cancelled by a
client disconnect), so a test can check that a client going away closed the upstream request.

Streams: response.created, response.in_progress, per item output_item.added / content_part.added /
output_text.delta... / ...done / output_item.done (function_call_arguments.delta, custom_tool_call_input.delta
for calls; reasoning_summary_part.added / reasoning_summary_text.delta / ...done for reasoning), then
response.completed. Every event carries `sequence_number`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import trio

from daari.server.asgi_io import answer_lifespan, read_all
from tests.fakes.openai_upstream import _sample, _text_of  # one answer shape for both fakes

CREATED = 1_700_000_000
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"


PLACEHOLDER = re.compile(r"REDACTED_[A-Z_]+_[0-9a-f]{12}")


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any




def _offered(body: dict[str, Any], items: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str | None]]:
    """The function and custom tools the model is offered, with their namespace: top-level `tools` and
    `additional_tools` input items (Codex's default model sends its tools only there)."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    for item in items:
        if item.get("type") == "additional_tools":
            tools += [t for t in item.get("tools") or [] if isinstance(t, dict)]
    offered: list[tuple[dict[str, Any], str | None]] = []
    for tool in tools:
        if tool.get("type") == "namespace":
            offered += [(t, tool.get("name")) for t in tool.get("tools") or [] if isinstance(t, dict)]
        elif tool.get("type") in ("function", "custom"):
            offered.append((tool, None))
    return offered


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    value = body.get("input")
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return [i for i in value or [] if isinstance(i, dict)]


def _last_user_text(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        if (item.get("type") or "message") == "message" and item.get("role") == "user":
            return _text_of(item.get("content"))
    return ""


class FakeResponses:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.script: list[str] = []
        self.active_streams = 0
        self.closed_streams = 0
        self.sent = b""  # the last /responses/compact or /responses/input_tokens answer, as sent
        self._ids = 0

    def _id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}_fake{self._ids}"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        if scope["type"] != "http":
            return
        raw = await read_all(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body: Any = json.loads(raw) if raw else None
        self.requests.append(RecordedRequest(scope["path"], headers, body))
        if scope["method"] == "POST" and isinstance(body, dict) and scope["path"] in COMPANION:
            self.sent = COMPANION[scope["path"]](self, body)
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": self.sent, "more_body": False})
            return
        if scope["method"] != "POST" or scope["path"] != "/v1/responses" or not isinstance(body, dict):
            await _json(send, 404, {"error": {"message": "not found", "type": "invalid_request_error",
                                              "param": None, "code": None}})
            return
        behaviour = self.script.pop(0) if self.script else str(body.get("model"))
        if behaviour == "error400":
            await _json(send, 400, {"error": {"message": "Invalid value for 'input'.", "type":
                                              "invalid_request_error", "param": "input", "code": None}})
            return
        if behaviour == "failed" and not body.get("stream"):
            await _json(send, 500, {"error": {"message": "The server had an error", "type": "server_error",
                                              "param": None, "code": None}})
            return
        output, status = self._output(behaviour, body)
        response = self._response(body, output, status)
        if not body.get("stream"):
            await _json(send, 200, response)
            return
        self.active_streams += 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
                await self._stream(behaviour, response, send)
                nursery.cancel_scope.cancel()
        finally:
            self.active_streams -= 1
            self.closed_streams += 1

    async def _stream(self, behaviour: str, response: dict[str, Any], send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        events = self._events(behaviour, response)
        for event in events[:5] if behaviour == "hang" else events:
            await send({"type": "http.response.body", "body": _sse(event), "more_body": True})
        if behaviour == "hang":
            await trio.sleep_forever()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _output(self, behaviour: str, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        items = _items(body)
        tools = _offered(body, items)
        last = items[-1] if items else {}
        if behaviour == "tools" and tools and last.get("type") not in ("function_call_output",
                                                                        "custom_tool_call_output"):
            tool, namespace = tools[0]
            # As OpenAI's API: a call to a namespaced tool names the namespace (the default one, Codex's
            # "functions", is left out).
            scope = {"namespace": namespace} if namespace and namespace != "functions" else {}
            if tool.get("type") == "custom":
                return [{"id": self._id("ctc"), "type": "custom_tool_call", "status": "completed",
                         "call_id": self._id("call"), "name": tool["name"], "input": PATCH, **scope}], "completed"
            schema = tool.get("parameters") or {}
            arguments = {k: _sample(schema.get("properties", {}).get(k)) for k in schema.get("required", [])}
            return [{"id": self._id("fc"), "type": "function_call", "status": "completed",
                     "call_id": self._id("call"), "name": tool["name"],
                     "arguments": json.dumps(arguments), **scope}], "completed"
        if behaviour == "echo_secret":
            marks = list(dict.fromkeys(PLACEHOLDER.findall(json.dumps(body))))
            name = tools[0][0].get("name", "bash") if tools else "bash"  # (tool, namespace) pairs
            return [{"id": self._id("msg"), "type": "message", "status": "completed", "role": "assistant",
                     "content": [{"type": "output_text", "text": "I will use " + " and ".join(marks) + ".",
                                  "annotations": []}]},
                    {"id": self._id("fc"), "type": "function_call", "status": "completed", "call_id": self._id("call"),
                     "name": name, "arguments": json.dumps({"command": "deploy " + " ".join(marks)})}], "completed"
        if behaviour == "tools" and last.get("type") in ("function_call_output", "custom_tool_call_output"):
            text = f"The tool said: {_text_of(last.get('output'))}"
        else:
            text = f"Here is a fine answer about {_last_user_text(items)!r} from the Responses fake."
        output: list[dict[str, Any]] = []
        if behaviour == "good":
            reasoning: dict[str, Any] = {"id": self._id("rs"), "type": "reasoning",
                                         "summary": [{"type": "summary_text", "text": "Thinking it over."}]}
            if "reasoning.encrypted_content" in (body.get("include") or []):
                reasoning["encrypted_content"] = f"enc-{self._ids}-opaque"
            output.append(reasoning)
        output.append({"id": self._id("msg"), "type": "message", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
        return output, "incomplete" if behaviour == "length" else "completed"

    def _response(self, body: dict[str, Any], output: list[dict[str, Any]], status: str) -> dict[str, Any]:
        """A complete response object, every field of the Responses schema, as OpenAI's API sends it."""
        tools = [{"description": None, "parameters": None, "strict": True, **t} if t.get("type") == "function"
                 else t for t in body.get("tools") or [] if isinstance(t, dict)]
        return {"id": self._id("resp"), "object": "response", "created_at": CREATED, "status": status,
                "completed_at": CREATED + 1 if status == "completed" else None,
                "error": None, "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete"
                else None, "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
                "max_tool_calls": body.get("max_tool_calls"), "model": body.get("model"), "output": output,
                "parallel_tool_calls": body.get("parallel_tool_calls", True), "previous_response_id": None,
                "reasoning": {"effort": None, "summary": None, **(body.get("reasoning") or {})},
                "store": body.get("store", True), "background": False, "service_tier": "default",
                "temperature": body.get("temperature", 1.0), "top_p": body.get("top_p", 1.0),
                "presence_penalty": 0.0, "frequency_penalty": 0.0, "top_logprobs": 0,
                "text": {"format": {"type": "text"}, **(body.get("text") or {})}, "truncation": "disabled",
                "tool_choice": body.get("tool_choice", "auto"), "tools": tools, "user": None, "metadata": {},
                "safety_identifier": None, "prompt_cache_key": body.get("prompt_cache_key"),
                "usage": {"input_tokens": 11, "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0},
                          "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 2},
                          "total_tokens": 18}}

    def _events(self, behaviour: str, response: dict[str, Any]) -> list[dict[str, Any]]:
        shell = {**response, "status": "in_progress", "output": [], "usage": None, "completed_at": None,
                 "incomplete_details": None}
        events: list[dict[str, Any]] = [{"type": "response.created", "response": shell},
                                        {"type": "response.in_progress", "response": shell}]
        for index, item in enumerate(response["output"]):
            events.extend(_item_events(index, item, 7 if behaviour == "echo_secret" else None))
            if behaviour == "truncate":
                return _numbered(events[:4])
        if behaviour == "failed":
            failed = {**shell, "status": "failed", "error": {"code": "server_error", "message": "model crashed"}}
            return _numbered([*events[:2], {"type": "response.failed", "response": failed}])
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        return _numbered([*events, {"type": kind, "response": response}])


def _compact(fake: FakeResponses, body: dict[str, Any]) -> bytes:
    """A compaction: the user messages kept, the rest as one opaque compaction item (as OpenAI's API does)."""
    kept = [{"id": fake._id("msg"), "type": "message", "status": "completed", "role": "user",
             "content": [{"type": "input_text", "text": _text_of(i.get("content"))}]}
            for i in _items(body) if i.get("role") == "user"]
    answer = {"id": fake._id("resp"), "object": "response.compaction", "created_at": CREATED,
              "output": [*kept, {"id": fake._id("cmp"), "type": "compaction", "encrypted_content": "enc-compacted"}],
              "usage": {"input_tokens": 139, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 43,
                        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 182}}
    return json.dumps(answer).encode()


def _input_tokens(fake: FakeResponses, body: dict[str, Any]) -> bytes:
    return json.dumps({"object": "response.input_tokens", "input_tokens": 7 * len(_items(body))}).encode()


COMPANION = {"/v1/responses/compact": _compact, "/v1/responses/input_tokens": _input_tokens}


def _item_events(index: int, item: dict[str, Any], piece: int | None = None) -> list[dict[str, Any]]:
    """`piece`: text and arguments in deltas of that many characters (default: text by words, arguments halved)."""
    kind, item_id = item["type"], item["id"]
    if kind == "message":
        text = item["content"][0]["text"]
        words = [w + " " for w in text.split(" ")]
        words[-1] = words[-1].rstrip(" ")
        if piece:
            words = [text[i:i + piece] for i in range(0, len(text), piece)]
        part = {"type": "output_text", "text": "", "annotations": []}
        at = {"item_id": item_id, "output_index": index, "content_index": 0}
        return [{"type": "response.output_item.added", "output_index": index,
                 "item": {**item, "status": "in_progress", "content": []}},
                {"type": "response.content_part.added", **at, "part": part},
                *({"type": "response.output_text.delta", **at, "delta": w, "logprobs": []} for w in words),
                {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
                {"type": "response.content_part.done", **at, "part": item["content"][0]},
                {"type": "response.output_item.done", "output_index": index, "item": item}]
    if kind in ("function_call", "custom_tool_call"):
        key, name = ("arguments", "function_call_arguments") if kind == "function_call" else \
            ("input", "custom_tool_call_input")
        value = item[key]
        half = len(value) // 2
        pieces = [value[i:i + piece] for i in range(0, len(value), piece)] if piece else [value[:half], value[half:]]
        at = {"item_id": item_id, "output_index": index}
        return [{"type": "response.output_item.added", "output_index": index,
                 "item": {**item, key: "", "status": "in_progress"}},
                *({"type": f"response.{name}.delta", **at, "delta": p} for p in pieces),
                {"type": f"response.{name}.done", **at, key: value},
                {"type": "response.output_item.done", "output_index": index, "item": item}]
    summary = item["summary"][0]
    at = {"item_id": item_id, "output_index": index, "summary_index": 0}
    return [{"type": "response.output_item.added", "output_index": index, "item": {**item, "summary": []}},
            {"type": "response.reasoning_summary_part.added", **at, "part": {**summary, "text": ""}},
            {"type": "response.reasoning_summary_text.delta", **at, "delta": summary["text"]},
            {"type": "response.reasoning_summary_text.done", **at, "text": summary["text"]},
            {"type": "response.reasoning_summary_part.done", **at, "part": summary},
            {"type": "response.output_item.done", "output_index": index, "item": item}]


async def _cancel_on_disconnect(receive: Any, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def _numbered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


async def _json(send: Any, status: int, data: dict[str, Any]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(data).encode(), "more_body": False})
