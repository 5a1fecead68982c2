"""`ChunkDecoder.feed`'s plain-text-delta path gives the events of `feed_by_shape` (the decoder of record), chunk by
chunk, on real streams and on generated chunks of every shape, errors included."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from daari.errors import UpstreamError
from daari.jsonio import loads
from daari.protocol.openai_render import ChunkDecoder
from daari.protocol.sse import SSEDecoder
from tests.stream_captures import captures, openai_stream

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.text(max_size=6))
DELTA = st.fixed_dictionaries({}, optional={
    "content": st.one_of(st.text(max_size=8), st.none(), st.integers()),
    "role": st.just("assistant"),
    "reasoning_content": st.one_of(st.text(max_size=4), st.none()),
    "tool_calls": st.one_of(st.none(), st.just([{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{"}}]),
                            st.just([{"index": 0, "function": {"arguments": "}"}}]), st.just("bad")),
})
CHOICE = st.fixed_dictionaries({"index": st.just(0)}, optional={
    "delta": st.one_of(DELTA, SCALARS),
    "finish_reason": st.one_of(st.none(), st.sampled_from(["stop", "length", "tool_calls", "error"])),
    "logprobs": st.one_of(st.none(), st.just({"content": [{"token": "a", "logprob": -0.5}]}), st.just({})),
})
CHUNK = st.one_of(st.fixed_dictionaries({}, optional={
    "model": st.one_of(st.text(max_size=5), st.integers()),
    "choices": st.one_of(st.lists(st.one_of(CHOICE, SCALARS), max_size=2), SCALARS),
    "usage": st.one_of(st.none(), st.just({"prompt_tokens": 3, "completion_tokens": 4}), st.just("bad")),
    "error": st.one_of(st.none(), st.just({"message": "boom"}), st.just("")),
}), SCALARS)
# The shapes a real stream sends, so that sequences hit the fast path and the chunks around it often: text deltas
# (with logprobs or usage sometimes), the finish chunk, the usage chunk.
LOGPROBS = st.one_of(st.none(), st.just({"content": [{"token": "a", "logprob": -0.5}]}), st.just({"content": []}))
TEXT_CHUNK = st.builds(lambda text, logprobs, usage, model: {
    "model": model, "choices": [{"index": 0, "delta": {"content": text}, "logprobs": logprobs, "finish_reason": None}],
    **usage}, st.text(max_size=6), LOGPROBS,
    st.sampled_from([{}, {"usage": None}, {"usage": {"prompt_tokens": 1, "completion_tokens": 2}}]),
    st.sampled_from(["m", "other", 7]))
FINISH_CHUNK = st.builds(lambda reason: {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]},
                         st.sampled_from(["stop", "length", "tool_calls"]))
USAGE_CHUNK = st.just({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
REAL_CHUNK = st.one_of(TEXT_CHUNK, TEXT_CHUNK, TEXT_CHUNK, FINISH_CHUNK, USAGE_CHUNK, CHUNK)


def _outcomes(chunks: list[Any], fast: bool) -> list[object]:
    decoder = ChunkDecoder()
    feed = decoder.feed if fast else decoder.feed_by_shape
    out: list[object] = []
    for chunk in chunks:
        try:
            out.append(feed(chunk))
        except UpstreamError as exc:
            out.append(f"error: {exc.message}")
            return out
    try:
        out.append(decoder.end())
    except UpstreamError as exc:
        out.append(f"end: {exc.message}")
    return out


@settings(max_examples=400, deadline=None)
@given(chunks=st.lists(REAL_CHUNK, max_size=12))
@example(chunks=[  # a text delta after the finish and usage chunks: dropped, as the general path drops it
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
    {"model": "m", "choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": None, "finish_reason": None}]}])
def test_feed_gives_the_events_of_feed_by_shape_on_generated_chunks(chunks: list[Any]) -> None:
    assert _outcomes(chunks, fast=True) == _outcomes(chunks, fast=False)


def test_feed_gives_the_events_of_feed_by_shape_on_real_streams() -> None:
    bodies = [body for name, body in captures().items() if name.startswith("openai")]
    with_logprobs = b'"logprobs": {"content": [{"token": "w", "logprob": -0.5}]}'
    bodies.append(openai_stream("long", 20).replace(b'"logprobs": null', with_logprobs))
    fed = 0
    for body in bodies:
        chunks = [loads(e.data) for e in SSEDecoder().feed_bytes(body) if e.data != b"[DONE]"]
        assert _outcomes(chunks, fast=True) == _outcomes(chunks, fast=False)
        fed += len(chunks)
    assert fed > 50
