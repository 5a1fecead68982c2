"""A fake Anthropic Messages upstream (ASGI): the real event sequence, with behaviours chosen by model name.

Models: "good" (text in several deltas), "tools" (text, then two parallel tool_use blocks, one with empty
input), "short" (stops at max_tokens), "refuse" (HTTP 400 invalid_request_error), "error429" (HTTP 429 with
retry-after), "error529" (HTTP 529 overloaded_error), "unauthorized" (HTTP 401 whose message echoes the
x-api-key it got, as a careless upstream might), "hang" (starts the stream, then sends nothing until the
client goes away), "drop" (an `event: error` overloaded_error mid-stream, as the real API does), "cut"
(closes without message_stop; without streaming, a cut-off JSON body), "echo_secret" (repeats the placeholders
daari put in its prompt, REDACTED_<KIND>_<hex>, in a text block and in a `bash` tool_use's command, streamed in
7-character pieces so placeholders cross events), "long" (`max_tokens` words, one text_delta each: benchmarks of
the stream relay). Any other model behaves as "good". `token_delay_s` (default 0) waits that long before each
text or tool-input delta of a stream (a model generating).
`/v1/messages/count_tokens` answers `{"input_tokens": n}` (about 4 characters of system+messages+tools a
token), or the same errors for "unauthorized", "refuse" and "error529", and a 404 for "nocount".
A request with `thinking` enabled gets a thinking block (thinking_delta + signature_delta) first.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import trio
import trio.lowlevel

from daari.server.asgi_io import answer_lifespan, read_all

GOOD_TEXT = ["Hello", " from the", " fake Anthropic", " upstream."]
TOOLS_TEXT = ["Let me ", "check."]
TOOL_CALLS = [
    ("toolu_fake_1", "get_weather", ['{"city": ', '"Paris", "unit"', ': "°C"}']),
    ("toolu_fake_2", "list_files", [""]),
]
PLACEHOLDER = re.compile(r"REDACTED_[A-Z_]+_[0-9a-f]{12}")
THINKING = ["Let me think", " about this."]
SIGNATURE = "fake-signature-EqQBCkYIBxgCKkA"


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    query: str = ""


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}


class FakeAnthropic:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.streams_started = 0
        self.streams_closed = 0
        self.a_stream_closed = trio.Event()  # set when a stream ends, however it ends
        self.token_delay_s = 0.0  # a stream waits this long before each delta (a model generating)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        if scope["type"] != "http":
            return
        raw = await read_all(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path = scope["path"]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            await self._json(send, 400, _error_body("invalid_request_error", "body is not valid JSON"))
            return
        self.requests.append(RecordedRequest(path=path, headers=headers, body=body,
                                             query=scope.get("query_string", b"").decode()))
        if scope["method"] != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            await self._json(send, 404, _error_body("not_found_error", f"no route {path}"))
            return
        if path.endswith("/count_tokens"):
            await self._count_tokens(body, headers, send)
            return
        await self._messages(body, headers, receive, send)

    async def _count_tokens(self, body: dict[str, Any], headers: dict[str, str], send: Any) -> None:
        """count_tokens with the same failure models as messages; "nocount" is an upstream without the route."""
        model = body.get("model", "good")
        if model == "unauthorized":
            message = f"invalid x-api-key: {headers.get('x-api-key', '')}"
            await self._json(send, 401, _error_body("authentication_error", message))
        elif model == "refuse":
            await self._json(send, 400, _error_body("invalid_request_error", "prompt is too long"))
        elif model == "error529":
            await self._json(send, 529, _error_body("overloaded_error", "Overloaded"))
        elif model == "nocount":
            await self._json(send, 404, _error_body("not_found_error", "no route /v1/messages/count_tokens"))
        else:
            await self._json(send, 200, {"input_tokens": self._input_tokens(body)})

    async def _messages(self, body: dict[str, Any], headers: dict[str, str], receive: Any, send: Any) -> None:
        model = body.get("model", "good")
        if model == "unauthorized":
            message = f"invalid x-api-key: {headers.get('x-api-key', '')}"
            await self._json(send, 401, _error_body("authentication_error", message))
        elif model == "refuse":
            await self._json(send, 400, _error_body("invalid_request_error", "prompt is too long"))
        elif model == "error429":
            await self._json(send, 429, _error_body("rate_limit_error", "slow down"),
                             [(b"retry-after", b"2")])
        elif model == "error529":
            await self._json(send, 529, _error_body("overloaded_error", "Overloaded"))
        elif body.get("stream"):
            await self._stream(body, model, receive, send)
        elif model == "hang":
            await self._wait_for_disconnect(receive)
        elif model == "cut":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"id": "msg_fake", "content": [{"type'})
        else:
            await self._json(send, 200, self._message(body, model))

    def _blocks(self, body: dict[str, Any], model: str) -> list[dict[str, Any]]:
        """The answer's content blocks, each with the pieces it streams in."""
        blocks: list[dict[str, Any]] = []
        if (body.get("thinking") or {}).get("type") == "enabled":
            blocks.append({"type": "thinking", "pieces": THINKING})
        if model == "echo_secret":
            marks = list(dict.fromkeys(PLACEHOLDER.findall(json.dumps(body))))
            text = "I will use " + " and ".join(marks) + "."
            arguments = json.dumps({"command": "deploy " + " ".join(marks)})
            blocks.append({"type": "text", "pieces": [text[i:i + 7] for i in range(0, len(text), 7)]})
            blocks.append({"type": "tool_use", "id": "toolu_echo_1", "name": "bash",
                           "pieces": [arguments[i:i + 7] for i in range(0, len(arguments), 7)]})
        elif model == "long":
            words = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 100
            blocks.append({"type": "text", "pieces": [f" word{i}" for i in range(words)]})
        elif model == "tools":
            blocks.append({"type": "text", "pieces": TOOLS_TEXT})
            for call_id, name, pieces in TOOL_CALLS:
                blocks.append({"type": "tool_use", "id": call_id, "name": name, "pieces": pieces})
        elif model == "short":
            blocks.append({"type": "text", "pieces": GOOD_TEXT[:2]})
        else:
            blocks.append({"type": "text", "pieces": GOOD_TEXT})
        return blocks

    def _stop_reason(self, model: str) -> str:
        return {"tools": "tool_use", "echo_secret": "tool_use", "short": "max_tokens"}.get(model, "end_turn")

    def _input_tokens(self, body: dict[str, Any]) -> int:
        return 1 + len(json.dumps([body.get("system"), body.get("messages"), body.get("tools")])) // 4

    def _message(self, body: dict[str, Any], model: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for block in self._blocks(body, model):
            text = "".join(block["pieces"])
            if block["type"] == "thinking":
                content.append({"type": "thinking", "thinking": text, "signature": SIGNATURE})
            elif block["type"] == "text":
                content.append({"type": "text", "text": text})
            else:
                content.append({"type": "tool_use", "id": block["id"], "name": block["name"],
                                "input": json.loads(text or "{}")})
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
                "stop_reason": self._stop_reason(model), "stop_sequence": None,
                "usage": {"input_tokens": self._input_tokens(body), "output_tokens": 7}}

    async def _stream(self, body: dict[str, Any], model: str, receive: Any, send: Any) -> None:
        self.streams_started += 1
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            start = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
                     "stop_reason": None, "stop_sequence": None,
                     "usage": {"input_tokens": self._input_tokens(body), "cache_read_input_tokens": 0,
                               "output_tokens": 1}}
            await self._send(send, "message_start", {"type": "message_start", "message": start})
            await self._send(send, "ping", {"type": "ping"})
            if model == "hang":
                await self._wait_for_disconnect(receive)
                return
            for index, block in enumerate(self._blocks(body, model)):
                await self._send_block(send, index, block)
                if model in ("drop", "cut"):
                    break
            if model == "drop":
                await self._send(send, "error", _error_body("overloaded_error", "Overloaded"))
            if model not in ("drop", "cut"):
                delta = {"type": "message_delta",
                         "delta": {"stop_reason": self._stop_reason(model), "stop_sequence": None},
                         "usage": {"output_tokens": 7}}
                await self._send(send, "message_delta", delta)
                await self._send(send, "message_stop", {"type": "message_stop"})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.streams_closed += 1
            self.a_stream_closed.set()

    async def _send_block(self, send: Any, index: int, block: dict[str, Any]) -> None:
        kind = block["type"]
        if kind == "thinking":
            start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in block["pieces"]]
            deltas.append({"type": "signature_delta", "signature": SIGNATURE})
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in block["pieces"]]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in block["pieces"]]
        await self._send(send, "content_block_start",
                         {"type": "content_block_start", "index": index, "content_block": start})
        for delta in deltas:
            if self.token_delay_s:
                await trio.sleep(self.token_delay_s)
            await self._send(send, "content_block_delta",
                             {"type": "content_block_delta", "index": index, "delta": delta})
        await self._send(send, "content_block_stop", {"type": "content_block_stop", "index": index})

    async def _send(self, send: Any, name: str, data: dict[str, Any]) -> None:
        await send({"type": "http.response.body", "body": _sse(name, data), "more_body": True})
        await trio.lowlevel.checkpoint()  # let the client see events one by one, as from a real model

    async def _wait_for_disconnect(self, receive: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _json(self, send: Any, status: int, body: dict[str, Any],
                    extra: list[tuple[bytes, bytes]] | None = None) -> None:
        payload = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
        await send({"type": "http.response.body", "body": payload, "more_body": False})
