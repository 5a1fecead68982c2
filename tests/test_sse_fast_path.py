"""The SSE decoder's per-read fast path gives the same events as its line-by-line path (the decoder of record) on
real streams in every shape the spec allows, cut at random read boundaries, under random size limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daari.jsonio import loads
from daari.protocol.sse import SSEDecoder, SSEError, SSEEvent, loads_data
from tests.stream_captures import SHAPES, captures, variant

CAPTURES = captures()


def _cut(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


def _run(reads: list[bytes], by_line: bool, **limits: int) -> tuple[list[SSEEvent], bool, str]:
    decoder = SSEDecoder(**limits)
    feed = decoder.feed_by_line if by_line else decoder.feed
    events: list[SSEEvent] = []
    try:
        for read in reads:
            events += feed(read)
    except SSEError as exc:
        return events, decoder.pending, str(exc)
    return events, decoder.pending, ""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(CAPTURES)), shape=st.sampled_from(SHAPES),
       cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=40))
def test_fast_feed_gives_the_events_of_the_line_by_line_feed_on_real_streams_cut_anywhere(
        name: str, shape: str, cuts: list[int]) -> None:
    reads = _cut(variant(CAPTURES[name], shape), cuts)
    fast, by_line = _run(reads, by_line=False), _run(reads, by_line=True)
    assert fast == by_line
    assert fast[0], "a capture without events tests nothing"


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(CAPTURES)), shape=st.sampled_from(SHAPES),
       cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=10),
       max_line=st.integers(min_value=8, max_value=400), max_event=st.integers(min_value=8, max_value=600))
def test_fast_feed_breaks_the_same_limits_as_the_line_by_line_feed(
        name: str, shape: str, cuts: list[int], max_line: int, max_event: int) -> None:
    reads = _cut(variant(CAPTURES[name], shape), cuts)
    limits = {"max_line_bytes": max_line, "max_event_bytes": max_event}
    fast, by_line = _run(reads, False, **limits), _run(reads, True, **limits)
    assert fast[2] == by_line[2]  # the same error (or none)
    if not fast[2]:
        assert fast == by_line


@given(text=st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), min_size=1, max_size=20),
       cut=st.integers(min_value=0, max_value=200))
def test_a_utf8_character_cut_between_reads_is_decoded_whole(text: str, cut: int) -> None:
    body = b'data: {"t": "' + text.encode() + b'"}\n\n' + b'event: x\ndata: ' + text.encode() + b"\n\n"
    cut %= len(body) + 1
    decoder = SSEDecoder()
    decoder.feed(b": hello\n\n")  # the first line read: the fast path from here on
    events = decoder.feed(body[:cut]) + decoder.feed(body[cut:])
    assert events == [SSEEvent(None, '{"t": "' + text + '"}'), SSEEvent("x", text)]


@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_of_a_real_stream_decodes_to_the_lf_shapes_events(shape: str) -> None:
    lf = _run([CAPTURES["anthropic tools"]], by_line=True)[0]
    events = _run([variant(CAPTURES["anthropic tools"], shape)], by_line=False)[0]
    if shape == "multiline":  # the data split over two lines comes back joined with LF
        assert [e.data.replace("\n", "") for e in events] == [e.data for e in lf]
    elif shape == "no_final_blank":  # the last event is not dispatched without its blank line (the spec)
        assert events == lf[:-1]
    elif shape == "comments":  # the empty data keep-alives are events with empty data
        assert [e for e in events if e.data] == lf
    else:
        assert events == lf


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(CAPTURES)), shape=st.sampled_from(SHAPES),
       cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=20))
def test_feed_bytes_gives_feeds_events_with_the_data_as_bytes(name: str, shape: str, cuts: list[int]) -> None:
    reads = _cut(variant(CAPTURES[name], shape), cuts)
    as_text, as_bytes = SSEDecoder(), SSEDecoder()
    for read in reads:
        text_events, byte_events = as_text.feed(read), as_bytes.feed_bytes(read)
        assert [(e.event, e.data.decode("utf-8", "replace")) for e in byte_events] == list(text_events)
        assert [_outcome(loads_data, e.data) for e in byte_events] == [_outcome(loads, e.data) for e in text_events]


def _outcome(parse: Callable[[Any], object], data: str | bytes) -> object:
    try:
        return parse(data)
    except ValueError as exc:
        return str(exc)


@pytest.mark.parametrize("data", [b'{"a": "\xff\xfe"}', b'{"n": NaN}', b'{"big": 123456789012345678901234567890}',
                                  b"{not json", b'{"a": "\xc3"}', b'{"e": "\\ud800"}', b"[" * 2000 + b"]" * 2000])
def test_loads_data_parses_bytes_as_loads_parses_their_text(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    try:
        expected: object = loads(text)
    except ValueError as exc:
        with pytest.raises(ValueError) as caught:
            loads_data(data)
        assert str(caught.value) == str(exc)
        return
    got = loads_data(data)
    assert got == expected or (expected != expected and got != got)  # NaN is not equal to itself
