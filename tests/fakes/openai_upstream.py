"""A fake OpenAI-compatible upstream: an ASGI app serving POST /v1/chat/completions and GET /v1/models.

Usage:
    fake = FakeOpenAI()
    async with serve_app(fake) as base_url:        # base_url like "http://127.0.0.1:PORT"
        ... point an executor at base_url + "/v1" ...
    fake.requests[-1].body, fake.requests[-1].headers  # what the client sent (headers lower-cased)

Behaviour is chosen per request by its `model` (unknown names behave as "good"), unless `fake.script`
holds behaviours: then each request pops the first one (e.g. `fake.script = ["error500", "good"]`).
`fake.reply` replaces the "good" (and "length") answer's text with a fixed one (a frontier model's answer to a
real prompt); `fake.answer_for(body)` does so per request when it returns a text.
`fake.delay_s` makes every answer wait that long first (a slow upstream); `fake.body_delay_s` makes a whole
(non-stream) answer send its headers at once and its body that much later; `fake.token_delay_s` (default 0)
paces generation: a stream waits that long before each content chunk, a whole answer waits it once per
token (benchmarks use it to make time-to-first-token meaningful). A request whose last user
message is daari's self-evaluation probe is answered with `fake.grade` (default "5"), as a grader would;
daari's Phase B classifier probe is answered with `fake.classification` (a JSON verdict).

    good        an echo-ish answer of 40+ characters about the last user message
    refuse      "I cannot help with that."
    short       "ok"
    ack         "Ok, any changes I propose will be to those files." (a small model's answer to an edit request)
    tools       a tool call to the request's first tool (arguments filled from its required properties);
                when the last message is a tool result: a text answer quoting it; without tools: as good
    length      as good, finish_reason "length"
    long        `max_tokens` words (100 without it), one chunk each when streamed (benchmarks of the stream relay)
    hang        never sends response headers (waits until the client goes away)
    hang_stream sends headers, the role chunk and one content chunk, then waits until the client goes away
    drop        streams two chunks, then breaks the connection (no [DONE], incomplete body)
    truncate    streams two chunks, then ends the body cleanly without finish_reason or [DONE]
    malformed   200 with a body that is not JSON (stream: an SSE event whose data is not JSON)
    error500    500 with an OpenAI error body
    error429    429 with Retry-After: 1
    error400    400 invalid_request_error
    error401    401 whose message echoes the presented bearer token, as a careless server might
    echo_secret a model that repeats the placeholders daari put in its prompt (REDACTED_<KIND>_<hex>): a text
                naming them and a call to the first tool (else "bash") whose command holds them all; its
                stream splits text and arguments into 7-character pieces, so placeholders cross chunks
    echo_url    400 whose message echoes the query string and the decoded Basic credentials it was reached
                with, as a careless gateway might

Streams use real `chat.completion.chunk` shapes: a role chunk, content or tool_calls deltas, a finish chunk,
then a usage chunk (choices: []) when `stream_options.include_usage`, then `data: [DONE]`. With
`"logprobs": true` choices carry `logprobs.content` (-0.25 per token). Every chat request handler counts in
`active_streams` while it runs and in `closed_streams` once it ended, finished or cancelled by a client
disconnect (stream or not), so a test can check that a client going away closed the upstream request.
`usages` holds the usage object of every answer, in order (what a provider would bill; a stream the fake cuts short
by its behaviour never sends its own). `fake.reports_usage = False` leaves usage out of every answer, as a server
that ignores `stream_options` does.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from daari.routing.confidence import SELF_EVAL_INSTRUCTION
from daari.routing.slm_classifier import SYSTEM_PROMPT
from daari.server.asgi_io import answer_lifespan, read_all

CLASSIFIER_PROMPT_START = SYSTEM_PROMPT[:40]

BEHAVIOURS = ("good", "refuse", "short", "ack", "tools", "length", "long", "hang", "hang_stream", "drop", "truncate",
              "malformed", "error500", "error429", "error400", "error401", "echo_url", "echo_secret")
PLACEHOLDER = re.compile(r"REDACTED_[A-Z_]+_[0-9a-f]{12}")
CREATED = 1_700_000_000
TOKEN_LOGPROB = -0.25


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON
    query: str = ""


class _Drop(Exception):
    """Raised inside the app to make Hypercorn break the connection mid-body."""


def _tokens(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _sample(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    samples: dict[Any, Any] = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    return samples.get(kind, "example")


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.script: list[str] = []
        self.active_streams = 0
        self.closed_streams = 0
        self.delay_s = 0.0  # wait this long before answering (a slow upstream)
        # A whole (non-stream) answer sends its headers at once, then waits this long before its body.
        self.body_delay_s = 0.0
        self.token_delay_s = 0.0  # per generated token: before each stream chunk, or summed for a whole answer
        self.grade = "5"  # the reply to daari's self-evaluation probe ("Rate 1-5 ...")
        # The reply to daari's Phase B classifier probe.
        self.classification = '{"task_type": "generate_small", "suggested_tier": "L4", "confidence": 0.9}'
        self.reply: str | None = None  # when set, the text "good" answers (a frontier model's answer to a real prompt)
        # When set and it returns a text for a request's body, "good" answers that (per-prompt answers).
        self.answer_for: Callable[[dict[str, Any]], str | None] | None = None
        self.usages: list[dict[str, int]] = []  # every usage object reported, in order
        self.reports_usage = True  # False: no usage in any answer (a server that ignores stream_options)
        self._ids = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        if scope["type"] != "http":
            return
        raw = await read_all(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        query = scope.get("query_string", b"").decode("latin-1")
        self.requests.append(RecordedRequest(scope["method"], scope["path"], headers, body, query))
        if scope["method"] == "GET" and scope["path"] == "/v1/models":
            data = [{"id": b, "object": "model", "created": CREATED, "owned_by": "fake"} for b in BEHAVIOURS]
            await _json(send, 200, {"object": "list", "data": data})
        elif scope["method"] == "POST" and scope["path"] == "/v1/chat/completions" and isinstance(body, dict):
            await self._chat(body, headers, receive, send)
        else:
            await _json(send, 404, _error("not found", "invalid_request_error"))

    async def _chat(self, body: dict[str, Any], headers: dict[str, str], receive: Any, send: Any) -> None:
        behaviour = self.script.pop(0) if self.script else str(body.get("model"))
        self.active_streams += 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
                await self._respond(behaviour, body, headers, send)
                nursery.cancel_scope.cancel()
        finally:
            self.active_streams -= 1
            self.closed_streams += 1

    async def _respond(self, behaviour: str, body: dict[str, Any], headers: dict[str, str],
                       send: Any) -> None:
        stream = bool(body.get("stream"))
        if self.delay_s:
            await trio.sleep(self.delay_s)
        if behaviour == "hang":
            await trio.sleep_forever()
        if behaviour == "error500":
            return await _json(send, 500, _error("The server had an error while processing your request.",
                                                 "server_error"))
        if behaviour == "error429":
            return await _json(send, 429, _error("Rate limit reached for requests", "requests",
                                                 "rate_limit_exceeded"), [(b"retry-after", b"1")])
        if behaviour == "error400":
            return await _json(send, 400, _error("Invalid value for 'messages': bad.",
                                                 "invalid_request_error", param="messages"))
        if behaviour == "echo_url":
            basic = headers.get("authorization", "").removeprefix("Basic ")
            userinfo = base64.b64decode(basic).decode() if basic else ""
            query = self.requests[-1].query
            return await _json(send, 400, _error(f"Bad request to ?{query} as {userinfo}.", "invalid_request_error"))
        if behaviour == "error401":
            token = headers.get("authorization", "").removeprefix("Bearer ")
            return await _json(send, 401, _error(f"Incorrect API key provided: {token}.",
                                                 "invalid_request_error", "invalid_api_key"))
        if behaviour == "malformed":
            kind = b"text/event-stream" if stream else b"application/json"
            payload = b"data: {not json\n\n" if stream else b'{"id": "chatcmpl-broken", "choices": ['
            return await _raw(send, 200, kind, payload)
        text, calls, reason = self._answer(behaviour, body)
        if stream:
            await self._stream(behaviour, body, text, calls, reason, send)
        else:
            if self.token_delay_s:
                await trio.sleep(self.token_delay_s * max(1, len(_tokens(text))))
            if self.body_delay_s:
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"application/json")]})
                await trio.sleep(self.body_delay_s)
                payload = json.dumps(self._completion(body, text, calls, reason)).encode()
                await send({"type": "http.response.body", "body": payload, "more_body": False})
                return
            await _json(send, 200, self._completion(body, text, calls, reason))

    def _answer(self, behaviour: str, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str]:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        users = [_text_of(m.get("content")) for m in messages if m.get("role") == "user"]
        last_user = users[-1] if users else ""
        tools = body.get("tools") or []
        first = messages[0] if messages else {}
        if first.get("role") == "system" and _text_of(first.get("content")).startswith(CLASSIFIER_PROMPT_START):
            return self.classification, [], "stop"  # daari's Phase B classifier probe
        if last_user.rstrip().endswith(SELF_EVAL_INSTRUCTION):
            return self.grade, [], "stop"  # daari's self-evaluation probe: answer like a grader
        if behaviour == "refuse":
            return "I cannot help with that.", [], "stop"
        if behaviour == "short":
            return "ok", [], "stop"
        if behaviour == "long":
            words = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 100
            return " ".join(f"word{i}" for i in range(words)), [], "stop"
        if behaviour == "ack":
            return "Ok, any changes I propose will be to those files.", [], "stop"
        if behaviour == "echo_secret":
            marks = list(dict.fromkeys(PLACEHOLDER.findall(json.dumps(body))))
            name = (tools[0].get("function") or {}).get("name", "bash") if tools else "bash"
            self._ids += 1
            call = {"id": f"call_fake{self._ids}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps({"command": "deploy " + " ".join(marks)})}}
            return "I will use " + " and ".join(marks) + ".", [call], "tool_calls"
        if behaviour == "tools" and messages and messages[-1].get("role") == "tool":
            return f"The tool returned: {_text_of(messages[-1].get('content'))}", [], "stop"
        if behaviour == "tools" and tools:
            function = tools[0].get("function", {})
            schema = function.get("parameters") or {}
            props = schema.get("properties") or {}
            arguments = {name: _sample(props.get(name)) for name in schema.get("required") or []}
            self._ids += 1
            call = {"id": f"call_fake{self._ids}", "type": "function",
                    "function": {"name": function.get("name", ""), "arguments": json.dumps(arguments)}}
            return "", [call], "tool_calls"
        text = f"Here is a careful answer about your request: {last_user or 'nothing was asked'}."
        if self.reply is not None:
            text = self.reply
        if self.answer_for is not None and (scripted := self.answer_for(body)) is not None:
            text = scripted
        return text, [], "length" if behaviour == "length" else "stop"

    def _usage(self, body: dict[str, Any], text: str, calls: list[dict[str, Any]]) -> dict[str, int]:
        prompt = sum(len(_tokens(_text_of(m.get("content")))) for m in body.get("messages") or []
                     if isinstance(m, dict))
        completion = len(_tokens(text)) + sum(len(_tokens(c["function"]["arguments"])) for c in calls)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        self.usages.append(usage)
        return usage

    def _next_id(self) -> str:
        self._ids += 1
        return f"chatcmpl-fake{self._ids}"

    def _completion(self, body: dict[str, Any], text: str, calls: list[dict[str, Any]],
                    reason: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None,
                                   "annotations": []}
        if calls:
            message["tool_calls"] = calls
        logprobs = {"content": [_logprob(t) for t in _tokens(text)], "refusal": None} \
            if body.get("logprobs") and text else None
        return {"id": self._next_id(), "object": "chat.completion", "created": CREATED,
                "model": body.get("model"), "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": reason}],
                **({"usage": self._usage(body, text, calls)} if self.reports_usage else {})}

    async def _stream(self, behaviour: str, body: dict[str, Any], text: str, calls: list[dict[str, Any]],
                      reason: str, send: Any) -> None:
        include_usage = self.reports_usage and bool((body.get("stream_options") or {}).get("include_usage"))
        response_id = self._next_id()

        def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> bytes:
            data: dict[str, Any] = {
                "id": response_id, "object": "chat.completion.chunk", "created": CREATED,
                "model": body.get("model"), "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
            if include_usage:
                data["usage"] = None
            return _sse(data)

        chunks = [chunk({"role": "assistant", "content": None if calls else "", "refusal": None})]
        pieces = [text[i:i + 7] for i in range(0, len(text), 7)] if behaviour == "echo_secret" else _tokens(text)
        for token in pieces:
            logprobs = {"content": [_logprob(token)], "refusal": None} if body.get("logprobs") else None
            chunks.append(chunk({"content": token}, logprobs=logprobs))
        for index, call in enumerate(calls):
            head = {"index": index, "id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}
            chunks.append(chunk({"tool_calls": [head]}))
            arguments = call["function"]["arguments"]
            third = 7 if behaviour == "echo_secret" else max(1, len(arguments) // 3)
            for start in range(0, len(arguments), third):
                piece = {"index": index, "function": {"arguments": arguments[start:start + third]}}
                chunks.append(chunk({"tool_calls": [piece]}))
        generated = range(1, len(chunks))  # content and tool-call chunks, after the role chunk
        chunks.append(chunk({}, finish=reason))
        if include_usage:
            chunks.append(_sse({"id": response_id, "object": "chat.completion.chunk", "created": CREATED,
                                "model": body.get("model"), "system_fingerprint": "fp_fake", "choices": [],
                                "usage": self._usage(body, text, calls)}))
        chunks.append(b"data: [DONE]\n\n")

        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream; charset=utf-8")]})
        if behaviour in ("hang_stream", "drop", "truncate"):
            cut = 2  # the role chunk and one content chunk
            for index, data in enumerate(chunks[:cut]):
                await self._pace(index, generated)
                await send({"type": "http.response.body", "body": data, "more_body": True})
            if behaviour == "hang_stream":
                await trio.sleep_forever()
            if behaviour == "drop":
                raise _Drop("connection dropped on purpose")
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        for index, data in enumerate(chunks):
            await self._pace(index, generated)
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pace(self, index: int, generated: range) -> None:
        """With `token_delay_s`, wait before each generated chunk (not the role, finish or usage chunks)."""
        if self.token_delay_s and index in generated:
            await trio.sleep(self.token_delay_s)


def _logprob(token: str) -> dict[str, Any]:
    return {"token": token, "logprob": TOKEN_LOGPROB, "bytes": list(token.encode()), "top_logprobs": []}


def _sse(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def _error(message: str, kind: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


async def _cancel_on_disconnect(receive: Any, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _raw(send: Any, status: int, content_type: bytes, payload: bytes,
               headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), *(headers or [])]})
    await send({"type": "http.response.body", "body": payload, "more_body": False})


async def _json(send: Any, status: int, data: dict[str, Any],
                headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await _raw(send, status, b"application/json", json.dumps(data).encode(), headers)
