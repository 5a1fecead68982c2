"""The SSE decoder: the spec's line ends (CR, LF, CRLF, split anywhere), a bounded buffer, linear time."""

from __future__ import annotations

import pytest

from daari.protocol.sse import SSEDecoder, SSEError, SSEEvent, encode

STREAM = "event: a\ndata: one\ndata: two\n\n: comment\ndata: {\"x\": 1}\n\nid: 7\nretry: 10\ndata: é\n\n"
EXPECTED = [SSEEvent("a", "one\ntwo"), SSEEvent(None, '{"x": 1}'), SSEEvent(None, "é")]


def decode_in_pieces(raw: bytes, size: int) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for i in range(0, len(raw), size) for e in decoder.feed(raw[i:i + size])]
    assert not decoder.pending
    return events


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_every_line_end_in_any_split(line_end: str, size: int) -> None:
    raw = STREAM.replace("\n", line_end).encode()
    assert decode_in_pieces(raw, size) == EXPECTED


def test_crlf_split_between_chunks_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r") == [SSEEvent(None, "a")]  # CRLF, then a CR: the blank line
    assert decoder.feed(b"\ndata: b\r\r") == [SSEEvent(None, "b")]  # that LF is CR's pair, not a blank line
    assert not decoder.pending


def test_mixed_line_ends_bom_and_fields_without_colon() -> None:
    decoder = SSEDecoder()
    events = decoder.feed("\ufeffdata: x\r\ndata\revent: e\n\n".encode())
    assert events == [SSEEvent("e", "x\n")]


def test_event_without_data_is_not_dispatched_and_cut_stream_is_pending() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: ping\n\n") == []
    assert decoder.feed(b"data: half") == [] and decoder.pending
    assert decoder.feed(b"\n") == [] and decoder.pending  # a data line without its blank line


def test_a_line_without_an_end_cannot_grow_without_limit() -> None:
    decoder = SSEDecoder(max_line_bytes=1024)
    decoder.feed(b"data: " + b"x" * 1000)
    with pytest.raises(SSEError, match="longer than 1024"):
        decoder.feed(b"x" * 100)
    with pytest.raises(SSEError):
        SSEDecoder(max_line_bytes=1024).feed(b"data: " + b"y" * 2000 + b"\n\n")


def test_an_event_of_many_lines_is_bounded_too() -> None:
    decoder = SSEDecoder(max_line_bytes=100, max_event_bytes=1000)
    with pytest.raises(SSEError, match="larger than 1000"):
        decoder.feed(b"data: 0123456789\n" * 200)


def test_decoding_is_linear_in_the_input() -> None:
    """Counted, not timed: the decoder touches each byte a bounded number of times.

    A stream of many short events in one chunk, and one long line fed a byte at a time, each cost a
    number of bytes copied proportional to their size (the quadratic decoder copied the whole rest of
    the buffer per line, and re-scanned the whole partial line per byte).
    """
    many = encode({"i": 1}) * 20_000  # ~300 KB in one chunk
    decoder = SSEDecoder()
    assert len(decoder.feed(many)) == 20_000

    copied = 0
    real_grow = SSEDecoder._grow

    def counting_grow(self: SSEDecoder, piece: bytes) -> None:
        nonlocal copied
        copied += len(piece)
        real_grow(self, piece)

    SSEDecoder._grow = counting_grow  # type: ignore[method-assign]
    try:
        slow = SSEDecoder()
        line = b"data: " + b"z" * 50_000
        for i in range(len(line)):
            slow.feed(line[i:i + 1])
        assert slow.feed(b"\n\n") == [SSEEvent(None, "z" * 50_000)]
    finally:
        SSEDecoder._grow = real_grow  # type: ignore[method-assign]
    assert copied <= 2 * len(line)


@pytest.mark.parametrize("reads", [
    [b"\xef\xbb\xbfdata: x\n\ndata: y\n\n"],  # a whole stream in one read, its BOM whole: the per-read path
    [b"\xef", b"\xbb\xbfdata: x\n\ndata: y\n\n"],  # the BOM cut: line by line until the first line ends
    [b"\xef\xbb", b"\xbfdata: x\n\n", b"data: y\n\n"],
    [b"\xef\xbb\xbfda", b"ta: x\n\ndata: y\n\n"],  # the first line begun in the read that held the BOM
    [b"", b"\xef\xbb\xbfdata: x\n\n", b"data: y\n\n"],  # an empty first read tells nothing yet
    [b"\xef\xbb\xbf", b"\xef\xbb\xbfdata: x\n\ndata: y\n\n"],  # one BOM dropped, not two: the second is the field's
    [b"data: x\n\ndata: y\n\n"],
])
def test_the_bom_is_dropped_once_however_the_first_read_ends(reads: list[bytes]) -> None:
    """The first read takes the per-read path when its BOM came whole; the events are the line-by-line decoder's."""
    fast, by_line = SSEDecoder(), SSEDecoder()
    got = [e for read in reads for e in fast.feed(read)]
    expected = [e for read in reads for e in by_line.feed_by_line(read)]
    assert got == expected
    assert got[-2:] == [SSEEvent(None, "x"), SSEEvent(None, "y")] or reads[0] == b"\xef\xbb\xbf"
