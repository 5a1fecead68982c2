"""The Responses stream renderer as a pure object: neutral events in, SSE bytes out, checked against the
official SDK's event models."""

from __future__ import annotations

import json
from typing import Any

from daari.errors import UpstreamError
from daari.protocol.chat import Usage
from daari.protocol.events import Event, Finish, TextDelta, ToolCallDelta, ToolCallStart
from daari.protocol.responses_stream import ResponsesStreamRenderer
from daari.protocol.responses_wire import parse_responses_request
from daari.protocol.sse import SSEDecoder
from tests.test_responses_shapes import EVENT_MODELS

TOOLS = [{"type": "function", "name": "a", "parameters": {"type": "object"}},
         {"type": "function", "name": "b", "parameters": {"type": "object"}}]


def render(events: list[Event], finals: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    request = parse_responses_request({"model": "m", "input": "go", "tools": TOOLS, "stream": True}, {})
    renderer = ResponsesStreamRenderer(request, "resp_test", 1, (finals if finals is not None else []).append)
    chunks = [*renderer.start(), *(c for e in events for c in renderer.event(e)), *renderer.finish({"tier": "L3"})]
    out = [json.loads(e.data) for e in SSEDecoder().feed(b"".join(chunks))]
    for event in out:
        EVENT_MODELS[event["type"]].model_validate(event)
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    return out


def test_interleaved_parallel_calls_keep_every_argument_piece() -> None:
    finals: list[dict[str, Any]] = []
    out = render([TextDelta("Let me check."), ToolCallStart(1, "c1", "a"), ToolCallStart(2, "c2", "b"),
                  ToolCallDelta(1, '{"x":'), ToolCallDelta(2, "{}"), ToolCallDelta(1, "1}"),
                  Finish("tool_calls", Usage(5, 3))], finals)
    response = out[-1]["response"]
    assert out[-1]["type"] == "response.completed" and response == finals[0]
    assert [(i["type"], i.get("arguments")) for i in response["output"]] == [
        ("message", None), ("function_call", '{"x":1}'), ("function_call", "{}")]
    deltas = [(e["output_index"], e["delta"]) for e in out if e["type"] == "response.function_call_arguments.delta"]
    assert deltas == [(1, '{"x":'), (2, "{}"), (1, "1}")]
    assert response["usage"]["input_tokens"] == 5 and response["daari_meta"] == {"tier": "L3"}


def test_an_empty_answer_is_one_empty_message() -> None:
    out = render([Finish("stop")])
    assert out[-1]["response"]["output"][0]["content"][0]["text"] == ""


def test_a_failure_mid_stream_is_error_then_response_failed() -> None:
    request = parse_responses_request({"model": "m", "input": "go", "stream": True}, {})
    finals: list[dict[str, Any]] = []
    renderer = ResponsesStreamRenderer(request, "resp_test", 1, finals.append)
    chunks = [*renderer.start(), *renderer.event(TextDelta("par")),
              *renderer.error(UpstreamError("upstream broke off"), {"error": "upstream_error"})]
    out = [json.loads(e.data) for e in SSEDecoder().feed(b"".join(chunks))]
    for event in out:
        EVENT_MODELS[event["type"]].model_validate(event)
    assert [e["type"] for e in out[-2:]] == ["error", "response.failed"]
    assert finals[0]["status"] == "failed" and finals[0]["error"]["code"] == "server_error"
