"""The stream renderers' delta frames (bytes around `dumps(text)`) are byte-identical to their general path
(`event_by_shape`: each chunk built as a dict and encoded whole), on generated events and on real streams."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from daari.jsonio import loads
from daari.protocol.anthropic_render import AnthropicEventDecoder, AnthropicStreamRenderer
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import Event, Finish, KeepAlive, NativeEvent, TextDelta, ToolCallDelta, ToolCallStart
from daari.protocol.openai_render import ChunkDecoder, OpenAIStreamRenderer
from daari.protocol.sse import SSEDecoder
from tests.stream_captures import captures

TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)  # no lone surrogates: not UTF-8
EVENTS = st.lists(st.one_of(
    st.builds(TextDelta, TEXT),
    st.builds(ToolCallStart, index=st.integers(0, 3), id=st.text(max_size=8), name=st.text(max_size=8)),
    st.builds(ToolCallDelta, index=st.integers(0, 3), arguments=TEXT),
    st.builds(KeepAlive),
    st.just(Finish(reason="stop")),
), max_size=40)
MODELS = st.sampled_from(["gpt-4o", "long", "m\u00e9\"\\ \u2713", "\x00daari:delta\x00", ""])


def _request(protocol: str, model: str, include_usage: bool) -> ChatRequest:
    return ChatRequest([Message("user", "hi")], model, protocol=protocol, stream=True,  # type: ignore[arg-type]
                       include_usage=include_usage)


def _renderers(protocol: str, model: str, include_usage: bool) -> tuple[Any, Any]:
    request = _request(protocol, model, include_usage)
    if protocol == "openai":
        return (OpenAIStreamRenderer(request, "chatcmpl-x", 1700000000),
                OpenAIStreamRenderer(request, "chatcmpl-x", 1700000000))
    return AnthropicStreamRenderer(request, "msg_x"), AnthropicStreamRenderer(request, "msg_x")


def _same_bytes(protocol: str, model: str, include_usage: bool, events: list[Event]) -> None:
    fast, general = _renderers(protocol, model, include_usage)
    assert fast.start() == general.start()
    for event in events:
        assert fast.event(event) == general.event_by_shape(event), event
    meta = {"tier": "L3"}
    assert fast.finish(meta) == general.finish(meta)


@settings(max_examples=300, deadline=None)
@given(protocol=st.sampled_from(["openai", "anthropic"]), model=MODELS, include_usage=st.booleans(), events=EVENTS)
def test_delta_frames_are_the_general_renderers_bytes_on_generated_events(
        protocol: str, model: str, include_usage: bool, events: list[Event]) -> None:
    _same_bytes(protocol, model, include_usage, events)


def _events_of(name: str, body: bytes) -> list[Event]:
    """A captured stream's events as the executors decode them (Anthropic's with the native events too)."""
    out: list[Event] = []
    items = SSEDecoder().feed_bytes(body)
    if name.startswith("openai"):
        chunks = ChunkDecoder()
        for item in items:
            if item.data != b"[DONE]":
                out += chunks.feed(loads(item.data))
        return out
    decoder = AnthropicEventDecoder()
    for item in items:
        data = loads(item.data)
        out.append(NativeEvent("anthropic", item.event or "", data))
        out += decoder.feed(item.event or "", data)
    return out


def test_delta_frames_are_the_general_renderers_bytes_on_real_streams() -> None:
    rendered = 0
    for name, body in captures().items():
        events = _events_of(name, body)
        neutral = [e for e in events if not isinstance(e, NativeEvent)]
        for protocol in ("openai", "anthropic"):
            for include_usage in (False, True):
                _same_bytes(protocol, "long", include_usage, neutral)
                rendered += len(neutral)
        _same_bytes("anthropic", "long", False, events)  # the same protocol: native events pass through
    assert rendered > 200
