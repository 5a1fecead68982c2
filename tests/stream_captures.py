"""Real upstream streams for the relay's fast-path tests: the fake upstreams' (tests/fakes) SSE bodies, byte for byte
as they send them, got by calling their ASGI apps in process, and variants of them in the other shapes the SSE spec
allows (CRLF and CR line ends, comments and keep-alives, multi-line data, a BOM, no blank line at the end)."""

from __future__ import annotations

import json
from typing import Any

import trio

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
ANTHROPIC_TOOLS = [{"name": "bash", "description": "run a command", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]


async def _body(app: Any, path: str, request: dict[str, Any]) -> bytes:
    sent: list[bytes] = []
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            await trio.sleep_forever()
        received = True
        return {"type": "http.request", "body": json.dumps(request).encode(), "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message.get("body", b""))

    scope = {"type": "http", "method": "POST", "path": path, "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"anthropic-version", b"2023-06-01")]}
    await app(scope, receive, send)
    return b"".join(sent)


def openai_stream(model: str, words: int = 30, tools: bool = False) -> bytes:
    """The fake OpenAI's stream for `model` (its behaviours: "long", "good", "tools", "echo_secret"...)."""
    request: dict[str, Any] = {"model": model, "stream": True, "max_tokens": words,
                               "stream_options": {"include_usage": True},
                               "messages": [{"role": "user", "content": "Write ä long answer ✓ please."}]}
    if tools:
        request["tools"] = TOOLS
    return trio.run(_body, FakeOpenAI(), "/v1/chat/completions", request)


def anthropic_stream(model: str, words: int = 30, tools: bool = False) -> bytes:
    """The fake Anthropic's stream for `model`."""
    request: dict[str, Any] = {"model": model, "stream": True, "max_tokens": words,
                               "messages": [{"role": "user", "content": "Write ä long answer ✓ please."}]}
    if tools:
        request["tools"] = ANTHROPIC_TOOLS
    return trio.run(_body, FakeAnthropic(), "/v1/messages", request)


def captures() -> dict[str, bytes]:
    """Every stream the tests replay, by name."""
    return {
        "openai long": openai_stream("long"),
        "openai good": openai_stream("good"),
        "openai tools": openai_stream("tools", tools=True),
        "openai echo_secret": openai_stream("echo_secret", tools=True),
        "anthropic long": anthropic_stream("long"),
        "anthropic good": anthropic_stream("good"),
        "anthropic tools": anthropic_stream("tools", tools=True),
    }


def variant(body: bytes, shape: str) -> bytes:
    """`body` (LF line ends, one blank line after each event) in another shape the SSE spec allows."""
    if shape == "crlf":
        return body.replace(b"\n", b"\r\n")
    if shape == "cr":
        return body.replace(b"\n", b"\r")
    if shape == "comments":  # a keep-alive comment before each event, an empty data keep-alive between some
        out = body.replace(b"\n\n", b"\n\n: keep-alive\n\n")
        return out.replace(b"\n\n: keep-alive\n\n", b"\n\n: ping\ndata:\n\n", 3)
    if shape == "multiline":  # each event's data split over two data lines (the spec joins them with LF)
        return b"\n".join(_split_data(line) for line in body.split(b"\n"))
    if shape == "bom":
        return b"\xef\xbb\xbf" + body
    if shape == "no_final_blank":  # the last event without the blank line that would dispatch it
        return body.rstrip(b"\n") + b"\n"
    if shape == "extra_fields":  # id and retry fields, and a field with no space after the colon
        return body.replace(b"\n\n", b"\nid: 7\nretry:100\n\n").replace(b"data: ", b"data:", 2)
    return body


def _split_data(line: bytes) -> bytes:
    if not line.startswith(b"data: ") or len(line) < 12:
        return line
    cut = len(line) // 2
    return line[:cut] + b"\ndata: " + line[cut:]


SHAPES = ("lf", "crlf", "cr", "comments", "multiline", "bom", "no_final_blank", "extra_fields")
