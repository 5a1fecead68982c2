"""Rendering neutral results as Anthropic messages, streams and errors; decoding upstream Anthropic output.

The official `anthropic` SDK reads the rendered streams over loopback, to prove it accepts them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import pytest

from daari.errors import (
    DaariError,
    InvalidRequest,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    UpstreamError,
    UpstreamOverloaded,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamUnavailable,
)
from daari.protocol.anthropic_render import (
    AnthropicEventDecoder,
    AnthropicStreamRenderer,
    events_from_message,
    message_to_events,
    render_error,
    render_message,
    render_models,
    upstream_error,
)
from daari.protocol.chat import ChatRequest, Completion, Message, ToolCall, Usage
from daari.protocol.events import (
    Event,
    Finish,
    KeepAlive,
    NativeEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    assemble,
)
from daari.protocol.sse import SSEDecoder
from tests.fakes.serving import serve_app_in_thread

META = {"tier": "L3", "cache": "miss"}


def make_request(model: str = "claude-test") -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content="hello there")], model=model,
                       protocol="anthropic", stream=True, sampling={"max_tokens": 100})


def parse_sse(chunks: list[bytes]) -> list[tuple[str | None, dict[str, Any]]]:
    decoder = SSEDecoder()
    events = decoder.feed(b"".join(chunks))
    assert not decoder.pending
    return [(e.event, json.loads(e.data)) for e in events]


TOOLS_COMPLETION = Completion(
    text="Checking.",
    tool_calls=[ToolCall("toolu_1", "get_weather", '{"city":"Paris"}'),
                ToolCall("toolu_2", "list_files", "")],
    finish_reason="tool_calls",
    usage=Usage(prompt_tokens=12, completion_tokens=30),
)


# ---------------------------------------------------------------- render_message


def test_render_message_with_text_and_tools() -> None:
    body = render_message(TOOLS_COMPLETION, make_request(), META, "msg_1")
    assert body == {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}},
        ],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 30},
        "daari_meta": META,
    }


@pytest.mark.parametrize(("reason", "expected"), [
    ("stop", "end_turn"), ("tool_calls", "tool_use"), ("length", "max_tokens"),
    ("stop_sequence", "stop_sequence"), ("content_filter", "refusal"),
])
def test_stop_reasons(reason: Any, expected: str) -> None:
    stop_sequence = "END" if reason == "stop_sequence" else None
    completion = Completion(text="x", finish_reason=reason, stop_sequence=stop_sequence)
    body = render_message(completion, make_request(), {}, "m")
    assert body["stop_reason"] == expected
    assert body["stop_sequence"] == ("END" if reason == "stop_sequence" else None)


def test_tool_only_answer_has_no_text_block_and_bad_arguments_become_empty_input() -> None:
    completion = Completion(tool_calls=[ToolCall("t", "f", "{not json")], finish_reason="tool_calls")
    body = render_message(completion, make_request(), {}, "m")
    assert body["content"] == [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]


def test_render_message_passes_a_native_body_through() -> None:
    native = {"id": "msg_up", "type": "message", "role": "assistant", "model": "claude-upstream",
              "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                          {"type": "text", "text": "hi"}],
              "stop_reason": "end_turn", "stop_sequence": None,
              "usage": {"input_tokens": 3, "output_tokens": 1, "cache_read_input_tokens": 9}}
    body = render_message(Completion(text="hi"), make_request(), META, "msg_1", native=native)
    assert body == {**native, "id": "msg_1", "model": "claude-test", "daari_meta": META}


# ---------------------------------------------------------------- errors and models


@pytest.mark.parametrize(("error", "status", "kind"), [
    (InvalidRequest("messages: bad", param="messages"), 400, "invalid_request_error"),
    (NotFound("no such route"), 404, "not_found_error"),
    (PayloadTooLarge("too big"), 413, "request_too_large"),
    (Overloaded("busy"), 529, "overloaded_error"),
    (UpstreamUnavailable("circuit open"), 529, "overloaded_error"),
    (UpstreamRateLimited("slow down"), 429, "rate_limit_error"),
    (UpstreamError("bad gateway"), 502, "api_error"),
    (UpstreamOverloaded("overloaded"), 529, "overloaded_error"),
    (UpstreamRejected("invalid x-api-key", status=401, anthropic_type="authentication_error"), 401,
     "authentication_error"),
])
def test_render_error(error: DaariError, status: int, kind: str) -> None:
    body = {"type": "error", "error": {"type": kind, "message": error.message}}
    assert render_error(error) == (status, body)


def test_render_models() -> None:
    models = render_models(["claude-a", "claude-b"])
    assert models["data"] == [
        {"type": "model", "id": "claude-a", "display_name": "claude-a", "created_at": "1970-01-01T00:00:00Z"},
        {"type": "model", "id": "claude-b", "display_name": "claude-b", "created_at": "1970-01-01T00:00:00Z"},
    ]
    assert (models["has_more"], models["first_id"], models["last_id"]) == (False, "claude-a", "claude-b")
    assert render_models([]) == {"data": [], "has_more": False, "first_id": None, "last_id": None}


# ---------------------------------------------------------------- stream renderer, neutral mode


NEUTRAL_EVENTS: list[Event] = [
    TextDelta("Check"), TextDelta("ing."),
    ToolCallStart(0, "toolu_1", "get_weather"), ToolCallDelta(0, '{"city":'), ToolCallDelta(0, '"Paris"}'),
    ToolCallStart(1, "toolu_2", "list_files"),
    Finish(reason="tool_calls", usage=Usage(prompt_tokens=12, completion_tokens=30)),
]


def render_stream(events: list[Event], request: ChatRequest | None = None, meta: dict[str, Any] = META,
                  ) -> list[bytes]:
    renderer = AnthropicStreamRenderer(request or make_request(), "msg_1")
    out = renderer.start()
    for event in events:
        out.extend(renderer.event(event))
    out.extend(renderer.finish(meta))
    return out


def test_stream_event_names_and_order() -> None:
    events = parse_sse(render_stream(NEUTRAL_EVENTS))
    assert all(name == data["type"] for name, data in events)  # every event has its `event:` line
    assert [(name, data.get("index")) for name, data in events] == [
        ("message_start", None), ("ping", None),
        ("content_block_start", 0), ("content_block_delta", 0), ("content_block_delta", 0),
        ("content_block_stop", 0),
        ("content_block_start", 1), ("content_block_delta", 1), ("content_block_delta", 1),
        ("content_block_stop", 1),
        ("content_block_start", 2), ("content_block_stop", 2),
        ("message_delta", None), ("message_stop", None),
    ]
    start = events[0][1]["message"]
    assert (start["id"], start["model"], start["content"], start["stop_reason"]) == (
        "msg_1", "claude-test", [], None)
    assert start["usage"]["input_tokens"] > 0
    assert events[2][1]["content_block"] == {"type": "text", "text": ""}
    assert events[6][1]["content_block"] == {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                             "input": {}}
    assert events[7][1]["delta"] == {"type": "input_json_delta", "partial_json": '{"city":'}
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"] == {"output_tokens": 30, "input_tokens": 12}
    assert delta["daari_meta"] == META


def test_text_after_a_tool_call_opens_a_new_text_block() -> None:
    events = parse_sse(render_stream([ToolCallStart(0, "t", "f"), TextDelta("after"), Finish(reason="stop")]))
    starts = [d["content_block"]["type"] for n, d in events if n == "content_block_start"]
    stops = [d["index"] for n, d in events if n == "content_block_stop"]
    assert starts == ["tool_use", "text"] and stops == [0, 1]


def test_empty_answer_still_ends_properly() -> None:
    events = parse_sse(render_stream([Finish(reason="length")]))
    assert [n for n, _ in events] == ["message_start", "ping", "message_delta", "message_stop"]
    assert events[2][1]["delta"]["stop_reason"] == "max_tokens"


def test_stream_error_event() -> None:
    renderer = AnthropicStreamRenderer(make_request(), "msg_1")
    renderer.start()
    renderer.event(TextDelta("partial"))
    events = parse_sse(renderer.error(UpstreamOverloaded("overloaded: Overloaded"), META))
    assert events == [("error", {"type": "error", "error": {"type": "overloaded_error",
                                                            "message": "overloaded: Overloaded"},
                                 "daari_meta": META})]


# ---------------------------------------------------------------- stream renderer, pass-through mode


def native_stream(body: dict[str, Any]) -> list[Event]:
    """What AnthropicExecutor emits for an upstream stream: each native event, then its neutral events."""
    decoder = AnthropicEventDecoder()
    out: list[Event] = []
    for name, data in message_to_events(body):
        out.append(NativeEvent("anthropic", name, data))
        out.extend(decoder.feed(name, data))
    return out


UPSTREAM_MESSAGE = {
    "id": "msg_up", "type": "message", "role": "assistant", "model": "claude-upstream",
    "content": [
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig-1"},
        {"type": "text", "text": "Héllo ✓"},
        {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls -la"}},
    ],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 40, "cache_read_input_tokens": 100, "output_tokens": 22},
}


def test_pass_through_writes_native_events_once() -> None:
    events = parse_sse(render_stream(native_stream(UPSTREAM_MESSAGE)))
    names = [n for n, _ in events]
    assert names.count("message_start") == 1 and names.count("message_stop") == 1
    assert names.count("content_block_start") == 3  # thinking, text, tool_use: nothing doubled
    deltas = [d for n, d in events if n == "content_block_delta"]
    texts = [d["delta"]["text"] for d in deltas if d["delta"]["type"] == "text_delta"]
    assert "".join(texts) == "Héllo ✓"  # in pieces, as a live stream sends it
    thinking = [d for d in deltas if d["delta"]["type"] == "thinking_delta"]
    assert thinking[0]["index"] == 0
    # the upstream's own message_start, unchanged: Claude Code's context meter reads its usage
    assert events[0][1]["message"]["id"] == "msg_up"
    assert events[0][1]["message"]["usage"] == UPSTREAM_MESSAGE["usage"]
    delta = events[-2][1]
    assert events[-2][0] == "message_delta"
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["daari_meta"] == META
    assert delta["usage"] == {"input_tokens": 40, "cache_read_input_tokens": 100, "output_tokens": 22}


def test_pass_through_of_a_whole_native_message() -> None:
    events_in: list[Event] = [NativeEvent("anthropic", "message", UPSTREAM_MESSAGE),
                              *events_from_message(UPSTREAM_MESSAGE)]
    events = parse_sse(render_stream(events_in))
    assert [n for n, _ in events].count("content_block_start") == 3
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_native_events_of_another_protocol_are_ignored() -> None:
    events = parse_sse(render_stream([NativeEvent("openai", "chunk", {"x": 1}), TextDelta("hi"),
                                      Finish(reason="stop")]))
    assert [d["delta"]["text"] for n, d in events if n == "content_block_delta"] == ["hi"]


# ---------------------------------------------------------------- upstream decoding


def test_events_from_message() -> None:
    events = events_from_message(UPSTREAM_MESSAGE)
    assert events == [
        TextDelta("Héllo ✓"),
        ToolCallStart(0, "toolu_9", "Bash"),
        ToolCallDelta(0, '{"command":"ls -la"}'),
        Finish(reason="tool_calls", usage=Usage(prompt_tokens=140, completion_tokens=22, cached_tokens=100),
               model="claude-upstream"),
    ]


def test_decoder_over_a_stream_assembles_the_message() -> None:
    decoder = AnthropicEventDecoder()
    events = [e for name, data in message_to_events(UPSTREAM_MESSAGE) for e in decoder.feed(name, data)]
    completion = assemble(events)
    assert decoder.finished
    assert completion.text == "Héllo ✓"
    assert completion.tool_calls == [ToolCall("toolu_9", "Bash", '{"command":"ls -la"}')]
    assert completion.finish_reason == "tool_calls"
    assert completion.usage == Usage(prompt_tokens=140, completion_tokens=22, cached_tokens=100)


def test_decoder_maps_block_indexes_to_tool_indexes_and_ignores_unknown_events() -> None:
    decoder = AnthropicEventDecoder()
    feed: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 5}}}),
        ("ping", {"type": "ping"}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "a"}}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "t1", "name": "f", "input": {}}}),
        ("content_block_start", {"type": "content_block_start", "index": 2, "content_block": {
            "type": "tool_use", "id": "t2", "name": "g", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "input_json_delta", "partial_json": '{"x":1}'}}),
        ("some_new_event", {"type": "some_new_event"}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "stop_sequence",
                                                              "stop_sequence": "END"},
                           "usage": {"output_tokens": 4}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    events = [e for name, data in feed for e in decoder.feed(name, data)]
    assert events == [
        KeepAlive(),  # the ping: alive, nothing to show
        TextDelta("a"), ToolCallStart(0, "t1", "f"), ToolCallStart(1, "t2", "g"),
        ToolCallDelta(1, "{}"), ToolCallDelta(0, '{"x":1}'),
        Finish(reason="stop_sequence", usage=Usage(5, 4), stop_sequence="END", model="m"),
    ]


def test_decoder_raises_on_an_error_event() -> None:
    decoder = AnthropicEventDecoder()
    with pytest.raises(UpstreamOverloaded) as info:
        decoder.feed("error", {"type": "error",
                               "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert info.value.retryable is True
    assert "Overloaded" in info.value.message


@pytest.mark.parametrize(("name", "data"), [
    ("content_block_delta", {"type": "content_block_delta", "index": 0}),
    ("content_block_start", {"type": "content_block_start", "content_block": {"type": "text"}}),
    ("message_start", {"type": "message_start"}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": "text"}),
])
def test_decoder_malformed_events_are_upstream_errors(name: str, data: dict[str, Any]) -> None:
    with pytest.raises(UpstreamError, match="malformed"):
        AnthropicEventDecoder().feed(name, data)


@pytest.mark.parametrize("body", [
    {"content": "text"}, {"type": "message"}, {"content": ["x"]},
    {"content": [{"type": "tool_use", "input": {}}]}, {"content": [{"type": "text"}]},
])
def test_events_from_malformed_message(body: dict[str, Any]) -> None:
    with pytest.raises(UpstreamError, match="malformed"):
        events_from_message(body)


@pytest.mark.parametrize(("status", "kind", "cls", "client_status"), [
    (400, "invalid_request_error", UpstreamRejected, 400),
    (401, "authentication_error", UpstreamRejected, 401),
    (404, "not_found_error", UpstreamRejected, 404),
    (413, "request_too_large", UpstreamRejected, 413),
    (429, "rate_limit_error", UpstreamRateLimited, 429),
    (500, "api_error", UpstreamError, 502),
    (529, "overloaded_error", UpstreamOverloaded, 529),
])
def test_upstream_http_errors(status: int, kind: str, cls: type, client_status: int) -> None:
    err = upstream_error({"type": "error", "error": {"type": kind, "message": "why"}}, status=status)
    assert type(err) is cls
    assert err.anthropic_status == client_status
    assert err.anthropic_type == kind
    assert err.retryable == (status >= 429)
    assert "why" in err.message


# ---------------------------------------------------------------- the official SDK reads the streams


def sse_app(chunks_for: Callable[[dict[str, Any]], list[bytes]]) -> Any:
    """A tiny ASGI app answering POST /v1/messages with the given SSE bytes."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = json.loads(raw)
        if body.get("stream"):
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            for chunk in chunks_for(body):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        else:
            payload = json.dumps(render_message(TOOLS_COMPLETION, make_request(body["model"]), META,
                                                "msg_1")).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": payload})

    return app


def sdk_client(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="x", max_retries=0)


def test_sdk_accumulates_a_neutral_stream() -> None:
    app = sse_app(lambda body: render_stream(NEUTRAL_EVENTS, make_request(body["model"])))
    with serve_app_in_thread(app) as url:
        with sdk_client(url).messages.stream(model="claude-test", max_tokens=100,
                                             messages=[{"role": "user", "content": "hi"}]) as stream:
            texts = list(stream.text_stream)
            final = stream.get_final_message()
    assert "".join(texts) == "Checking."
    assert final.id == "msg_1" and final.model == "claude-test"
    assert [b.type for b in final.content] == ["text", "tool_use", "tool_use"]
    assert final.content[0].text == "Checking."
    assert (final.content[1].name, final.content[1].input) == ("get_weather", {"city": "Paris"})
    assert (final.content[2].name, final.content[2].input) == ("list_files", {})
    assert final.stop_reason == "tool_use"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (12, 30)


def test_sdk_accumulates_a_pass_through_stream_with_thinking() -> None:
    app = sse_app(lambda body: render_stream(native_stream(UPSTREAM_MESSAGE), make_request(body["model"])))
    with serve_app_in_thread(app) as url:
        with sdk_client(url).messages.stream(model="claude-test", max_tokens=100,
                                             messages=[{"role": "user", "content": "hi"}]) as stream:
            final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0].thinking == "Let me think." and final.content[0].signature == "sig-1"
    assert final.content[1].text == "Héllo ✓"
    assert final.content[2].input == {"command": "ls -la"}
    assert final.usage.input_tokens == 40 and final.usage.output_tokens == 22


def test_sdk_reads_a_whole_message() -> None:
    with serve_app_in_thread(sse_app(lambda body: [])) as url:
        message = sdk_client(url).messages.create(model="claude-test", max_tokens=100,
                                                  messages=[{"role": "user", "content": "hi"}])
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert message.content[1].input == {"city": "Paris"}
    assert message.stop_reason == "tool_use"


def test_sdk_raises_on_a_mid_stream_error_event() -> None:
    def chunks(body: dict[str, Any]) -> list[bytes]:
        renderer = AnthropicStreamRenderer(make_request(body["model"]), "msg_1")
        return [*renderer.start(), *renderer.event(TextDelta("part")),
                *renderer.error(UpstreamOverloaded("overloaded: Overloaded"), META)]

    with serve_app_in_thread(sse_app(chunks)) as url:
        with pytest.raises(anthropic.APIStatusError) as info:
            with sdk_client(url).messages.stream(model="claude-test", max_tokens=100,
                                                 messages=[{"role": "user", "content": "hi"}]) as stream:
                stream.get_final_message()
    assert "overloaded_error" in str(info.value)


def test_native_message_rebuilds_what_the_upstream_streamed() -> None:
    from daari.protocol.anthropic_render import native_message

    rebuilt = native_message(native_stream(UPSTREAM_MESSAGE))
    assert rebuilt is not None
    assert rebuilt["content"] == UPSTREAM_MESSAGE["content"]  # thinking + signature, text, tool input
    assert rebuilt["stop_reason"] == "tool_use" and rebuilt["usage"]["output_tokens"] == 22
    whole = native_message([NativeEvent("anthropic", "message", UPSTREAM_MESSAGE)])
    assert whole == UPSTREAM_MESSAGE
    assert native_message([TextDelta("hi"), Finish(reason="stop")]) is None
