"""Property tests over the stream decoders: the SSE decoder (daari/protocol/sse.py) on any bytes cut anywhere,
the executors' event decoders (OpenAI chunks, Anthropic events, Responses events) on any JSON, and an upstream
streaming any mix of real and broken events to a running daari: the client always gets a whole stream or an
error in its own protocol, never a 500, a traceback or a normal end after a broken stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from daari.errors import DaariError
from daari.jsonio import dumps
from daari.protocol.anthropic_render import AnthropicEventDecoder
from daari.protocol.events import Event, NativeEvent
from daari.protocol.openai_render import ChunkDecoder
from daari.protocol.responses_decode import ResponsesEventDecoder
from daari.protocol.responses_render import RESPONSES, capture_native
from daari.protocol.sse import SSEDecoder, SSEError, SSEEvent
from daari.server.serve import RunningServer
from tests.fakes.serving import serve_app_in_thread
from tests.fuzz_support import ScriptedUpstream, check_shaped, check_stream
from tests.support import daari_loop_in_thread, make_config, upstream_tier
from tests.test_fuzz_requests import json_values, leaves_nothing_behind

sse_bytes = st.lists(st.sampled_from([b"data: ", b"event: ", b":", b"\r", b"\n", b"\r\n", b"\xef\xbb\xbf", b"x",
                                      b"{}", b"id: 1", b"\xff", b" "]) | st.binary(max_size=8),
                     max_size=40).map(b"".join)


def cuts(data: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({p % (len(data) + 1) for p in points})
    edges = [0, *marks, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


def decode(chunks: list[bytes], **limits: int) -> list[SSEEvent]:
    decoder = SSEDecoder(**limits)
    return [event for chunk in chunks for event in decoder.feed(chunk)]


@given(sse_bytes, st.lists(st.integers(0, 400), max_size=12))
def test_sse_events_do_not_depend_on_where_the_bytes_were_cut(data: bytes, points: list[int]) -> None:
    assert decode(cuts(data, points)) == decode([data])


@given(sse_bytes, st.lists(st.integers(0, 400), max_size=12), st.integers(1, 16), st.integers(1, 32))
def test_sse_limits_raise_sse_error_only_and_only_when_passed(data: bytes, points: list[int], line: int,
                                                                event: int) -> None:
    try:
        events = decode(cuts(data, points), max_line_bytes=line, max_event_bytes=event)
    except SSEError:
        assert min(line, event) < len(data)  # a limit the whole input is within is never passed
        return
    assert events == decode([data])


openai_chunks = st.fixed_dictionaries({}, optional={
    "id": st.text(max_size=5), "model": json_values,
    "choices": st.lists(st.fixed_dictionaries({}, optional={
        "index": json_values,
        "delta": st.fixed_dictionaries({}, optional={
            "role": json_values, "content": st.text(max_size=8) | json_values,
            "tool_calls": st.lists(st.fixed_dictionaries({}, optional={
                "index": st.integers(-1, 3) | json_values, "id": st.text(max_size=4) | json_values,
                "function": st.fixed_dictionaries({}, optional={"name": st.text(max_size=4) | json_values,
                                                                "arguments": st.text(max_size=6) | json_values})
                | json_values}) | json_values, max_size=3) | json_values}) | json_values,
        "finish_reason": st.sampled_from(["stop", "length", "tool_calls", None]) | json_values,
        "logprobs": json_values}), max_size=2) | json_values,
    "usage": st.fixed_dictionaries({}, optional={"prompt_tokens": json_values, "completion_tokens": json_values})
    | json_values,
    "error": json_values}) | json_values

ANTHROPIC_EVENTS = ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                    "message_delta", "message_stop", "ping", "error", "other"]
anthropic_data = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(ANTHROPIC_EVENTS) | json_values, "index": st.integers(-1, 3) | json_values,
    "message": st.fixed_dictionaries({}, optional={"id": json_values, "model": json_values,
                                                   "usage": json_values}) | json_values,
    "content_block": st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_use", "thinking"]) | json_values},
                                           optional={"id": json_values, "name": json_values, "text": json_values})
    | json_values,
    "delta": st.fixed_dictionaries({"type": st.sampled_from(["text_delta", "input_json_delta", "thinking_delta",
                                                             "signature_delta"]) | json_values},
                                   optional={"text": json_values, "partial_json": json_values,
                                             "stop_reason": json_values}) | json_values,
    "usage": json_values, "error": json_values})

RESPONSES_EVENTS = ["response.created", "response.output_item.added", "response.output_text.delta",
                    "response.function_call_arguments.delta", "response.output_item.done", "response.completed",
                    "response.failed", "response.incomplete", "error", "other"]
responses_data = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(RESPONSES_EVENTS) | json_values, "output_index": st.integers(-1, 3) | json_values,
    "delta": json_values, "item": st.fixed_dictionaries({"type": st.sampled_from(
        ["message", "function_call", "custom_tool_call", "reasoning"]) | json_values},
        optional={"call_id": json_values, "name": json_values, "arguments": json_values, "id": json_values})
    | json_values,
    "response": st.fixed_dictionaries({}, optional={"status": json_values, "usage": json_values,
                                                    "output": json_values, "error": json_values}) | json_values,
    "error": json_values})


@given(st.lists(openai_chunks, max_size=6))
def test_openai_chunk_decoder_takes_any_json_or_says_malformed(chunks: list[Any]) -> None:
    decoder = ChunkDecoder()
    try:
        for chunk in chunks:
            decoder.feed(chunk)
        decoder.end()
    except DaariError:
        pass


@given(st.lists(st.tuples(st.sampled_from(ANTHROPIC_EVENTS), anthropic_data), max_size=6))
def test_anthropic_event_decoder_takes_any_json_or_says_malformed(events: list[tuple[str, Any]]) -> None:
    decoder = AnthropicEventDecoder()
    try:
        for name, data in events:
            decoder.feed(name, data)
    except DaariError:
        pass


@given(st.lists(st.tuples(st.sampled_from(RESPONSES_EVENTS), responses_data), max_size=6))
def test_responses_event_decoder_takes_any_json_or_says_malformed(events: list[tuple[str, Any]]) -> None:
    decoder = ResponsesEventDecoder()
    try:
        for name, data in events:
            if isinstance(data, dict):  # the executor refuses non-objects before the decoder sees them
                decoder.feed(name, data)
    except DaariError:
        pass


def test_a_content_block_index_that_is_no_number_is_a_malformed_stream() -> None:
    # found by the property test above: int("") was a ValueError, a 500 in the middle of a stream
    decoder = AnthropicEventDecoder()
    with pytest.raises(DaariError, match="malformed|content_block_start"):
        decoder.feed("content_block_start", {"index": "", "content_block": {"type": "text", "text": ""}})


def test_a_responses_output_index_that_is_no_integer_takes_the_next_place() -> None:
    item = {"type": "message", "id": "m", "role": "assistant", "content": []}
    events: list[Event] = [
        NativeEvent(RESPONSES, "response.output_item.done", {"output_index": "x", "item": item}),
        NativeEvent(RESPONSES, "response.completed", {"response": {"id": "r", "output": []}})]
    assert capture_native(events) == {"id": "r", "output": [item]}


def test_a_responses_item_whose_type_is_an_object_is_no_tool_call() -> None:
    # found by the property test above: `type in CALL_ITEMS` with a dict type was a TypeError (a 500 mid-stream)
    decoder = ResponsesEventDecoder()
    item = {"type": {"function_call": 1}, "call_id": "c", "name": "n", "arguments": "{}"}
    assert decoder.feed("response.output_item.added", {"output_index": 0, "item": item}) == []
    assert decoder.feed("response.output_item.done", {"output_index": 0, "item": item}) == []


def sse_body(events: list[tuple[str | None, Any]], garbage: list[bytes]) -> bytes:
    out = b""
    for i, (name, data) in enumerate(events):
        head = f"event: {name}\n".encode() if name else b""
        out += head + b"data: " + dumps(data) + b"\n\n"
        if i < len(garbage):
            out += garbage[i]
    return out


# What each upstream kind streams: mostly its own real events (a whole valid stream sometimes), with garbage.
OPENAI_DONE = [(None, {"choices": [{"delta": {"content": "hi"}, "finish_reason": None}]}),
               (None, {"choices": [{"delta": {}, "finish_reason": "stop"}]})]
ANTHROPIC_DONE = [("message_start", {"type": "message_start", "message": {"id": "m", "model": "x", "usage": {}}}),
                  ("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}),
                  ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": "hello"}}),
                  ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}),
                  ("message_stop", {"type": "message_stop"})]
RESPONSES_DONE = [("response.output_text.delta", {"type": "response.output_text.delta", "delta": "hello"}),
                  ("response.completed", {"type": "response.completed",
                                          "response": {"status": "completed", "output": [], "usage": {}}})]


def stream_of(real: list[tuple[str | None, Any]], fuzzed: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    events = st.lists(st.sampled_from(real) | fuzzed, max_size=6)
    return st.tuples(events, st.lists(sse_bytes, max_size=3), st.booleans()).map(
        lambda t: sse_body(t[0] + (real if t[2] else []), t[1]) + (b"data: [DONE]\n\n" if t[2] else b""))


upstream_streams = st.one_of(
    st.tuples(st.just("L3"), stream_of(OPENAI_DONE, openai_chunks.map(lambda d: (None, d)))),
    st.tuples(st.just("L4"), stream_of(ANTHROPIC_DONE, st.tuples(st.sampled_from(ANTHROPIC_EVENTS),
                                                                 anthropic_data))),
    st.tuples(st.just("L5"), stream_of(RESPONSES_DONE, st.tuples(st.sampled_from(RESPONSES_EVENTS),
                                                                 responses_data))))
CLIENTS = {
    "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": "write a poem"}]},
    "/v1/messages": {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "write a poem"}]},
    "/v1/responses": {"model": "m", "input": "write a poem"},
}

Daari = tuple[RunningServer, trio.lowlevel.TrioToken, ScriptedUpstream]


@pytest.fixture(scope="module")
def daari(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daari]:
    tmp_path: Path = tmp_path_factory.mktemp("fuzz-streams")
    upstream = ScriptedUpstream()
    never_open = {"breaker": {"failure_threshold": 1_000_000}, "retry": {"max_retries": 0}}
    with serve_app_in_thread(upstream) as url:
        upstream.port = int(url.rsplit(":", 1)[1])
        config = make_config(tmp_path, tiers={
            "L3": upstream_tier("openai", url + "/v1", **never_open),
            "L4": upstream_tier("anthropic", url + "/v1", **never_open),
            "L5": upstream_tier("openai", url + "/v1", wire_api="responses", **never_open)},
            cache={"l1": {"enabled": False}}, server={"header_timeout_s": 2})
        with daari_loop_in_thread(config) as (server, token):
            yield server, token, upstream


def test_any_upstream_stream_reaches_every_client_whole_or_as_an_explicit_error(daari: Daari) -> None:
    server, token, upstream = daari

    def run(client: httpx.Client) -> None:
        @given(upstream_streams, st.lists(st.integers(0, 2000), max_size=8), st.sampled_from(sorted(CLIENTS)),
               st.booleans())
        def each(tier_and_body: tuple[str, bytes], points: list[int], path: str, stream: bool) -> None:
            tier, body = tier_and_body
            upstream.script.clear()
            upstream.script.append(("text/event-stream", cuts(body, points)))
            response = client.post(path, json={**CLIENTS[path], "stream": stream},
                                   headers={"x-daari-tier-override": tier, "x-daari-no-cache": "true"})
            check_shaped(path, response)
            if response.status_code == 200 and stream:
                check_stream(path, response)
        each()

    def warm_up(client: httpx.Client) -> None:  # each tier's pool and the response store open lazily
        for tier, done in (("L3", OPENAI_DONE), ("L4", ANTHROPIC_DONE), ("L5", RESPONSES_DONE)):
            upstream.script.append(("text/event-stream", [sse_body(done, []) + b"data: [DONE]\n\n"]))
            client.post("/v1/responses", json={**CLIENTS["/v1/responses"], "stream": True},
                        headers={"x-daari-tier-override": tier, "x-daari-no-cache": "true"})

    leaves_nothing_behind((server, token), run, warm_up, upstream.port)
