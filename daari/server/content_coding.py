"""Compressed request bodies (`Content-Encoding: gzip`, `deflate`, `br`, `zstd`): decoded as they arrive, in
slices of bounded size, and refused (413) the moment the decoded body passes `server.max_body_bytes` or grows
more than `server.max_expansion_ratio` times its size on the wire. A decompression bomb costs daari at most
the limit in memory and the time to decode that much.

gzip and deflate come from the standard library (zlib); brotli from `brotli` (Google's own bindings, whose
decoder can stop at an output size); zstd from `backports.zstd` (Python 3.14's `compression.zstd` for 3.11-3.13,
with the same `max_length` as zlib), its window capped at the 8 MiB that HTTP's zstd coding allows (RFC 9659),
so a frame cannot make daari allocate more.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Protocol

import brotli  # type: ignore[import-untyped]  # no stubs of its 1.2 API (output_buffer_limit)
from backports.zstd import DecompressionParameter, ZstdDecompressor, ZstdError

from daari.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType

SLICE = 256 * 1024  # decoded bytes at most per step: the caller checks the limits (and may yield) between steps
RATIO_FROM = 1024 * 1024  # the expansion ratio is enforced once the decoded body passes this
ZSTD_WINDOW_LOG = 23  # 8 MiB, RFC 9659's cap for Content-Encoding: zstd
CODINGS = ("gzip", "x-gzip", "deflate", "br", "zstd")


class _Codec(Protocol):
    def steps(self, data: bytes) -> Iterator[bytes]:
        """Decode `data` (the next bytes on the wire), at most SLICE bytes per item."""
        ...

    def finished(self) -> bool:
        """Whether the encoded stream ended where the body ended."""
        ...


class _Zlib:
    """gzip (members one after another, as RFC 1952 allows) or deflate (zlib-wrapped, or raw as some clients send)."""

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self.head = b""
        self.decoder: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None

    def steps(self, data: bytes) -> Iterator[bytes]:
        pending = data
        while True:
            if self.decoder is None:  # deflate: the first two bytes say whether it is zlib-wrapped (RFC 1950)
                pending = self.head + pending
                if len(pending) < 2:
                    self.head = pending  # a body fed a byte at a time: wait for the second
                    return
                wrapped = pending[0] & 0x0F == 8 and (pending[0] << 8 | pending[1]) % 31 == 0
                self.decoder = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            decoder = self.decoder
            if decoder.eof:
                if not pending:
                    return
                if not self.gzip:
                    raise InvalidRequest("the deflate-encoded request body has data after its end")
                self.decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)  # another gzip member follows
                continue
            out = decoder.decompress(pending, SLICE)
            pending = decoder.unused_data if decoder.eof else decoder.unconsumed_tail
            if out:
                yield out
            if not pending and len(out) < SLICE:  # all input taken and no output left inside the decoder
                return

    def finished(self) -> bool:
        return self.decoder is not None and self.decoder.eof


class _BrotliDecoder(Protocol):
    """`brotli.Decompressor` as daari uses it (brotli >= 1.2: output bounded per call)."""

    def process(self, data: bytes, output_buffer_limit: int = ...) -> bytes: ...

    def is_finished(self) -> bool: ...


class _Brotli:
    def __init__(self) -> None:
        self.decoder: _BrotliDecoder = brotli.Decompressor()

    def steps(self, data: bytes) -> Iterator[bytes]:
        if data and self.decoder.is_finished():
            raise InvalidRequest("the br-encoded request body has data after its end")
        # The output buffer stops growing once past the limit, so a call returns up to about twice it.
        out = self.decoder.process(data, output_buffer_limit=SLICE // 2)
        while out:  # empty: it needs more input, or the stream is finished
            yield out
            out = self.decoder.process(b"", output_buffer_limit=SLICE // 2)

    def finished(self) -> bool:
        return self.decoder.is_finished()


class _Zstd:
    """Frames one after another (RFC 8878 allows it), each with a window of at most 8 MiB."""

    def __init__(self) -> None:
        self.decoder = self._new()

    @staticmethod
    def _new() -> ZstdDecompressor:
        return ZstdDecompressor(options={DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG})

    def steps(self, data: bytes) -> Iterator[bytes]:
        pending = data
        while True:
            decoder = self.decoder
            if decoder.eof:
                if not pending:
                    return
                self.decoder = self._new()  # another frame follows
                continue
            if not pending and decoder.needs_input:
                return
            out = decoder.decompress(pending, SLICE)  # takes all of `pending`; output past SLICE waits inside
            pending = decoder.unused_data if decoder.eof else b""
            if out:
                yield out

    def finished(self) -> bool:
        return bool(self.decoder.eof)


_CODECS: dict[str, Callable[[], _Codec]] = {
    "gzip": lambda: _Zlib(gzip=True), "x-gzip": lambda: _Zlib(gzip=True), "deflate": lambda: _Zlib(gzip=False),
    "br": _Brotli, "zstd": _Zstd,
}


class BodyDecoder:
    """One compressed request body: feed it what arrives, then `finish`; every limit is checked per slice."""

    def __init__(self, coding: str, max_bytes: int, max_ratio: float) -> None:
        self.coding = coding
        self.codec = _CODECS[coding]()
        self.max_bytes = max_bytes
        self.max_ratio = max_ratio
        self.wire_bytes = 0
        self.decoded_bytes = 0

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded slices of `data`; raises PayloadTooLarge past a limit, InvalidRequest on a corrupt body."""
        self.wire_bytes += len(data)
        try:
            for piece in self.codec.steps(data):
                self.decoded_bytes += len(piece)
                self._check()
                yield piece
        except (zlib.error, brotli.error, ZstdError) as exc:
            raise InvalidRequest(f"the request body is not valid {self.coding} ({type(exc).__name__}: {exc})") \
                from None

    def finish(self) -> None:
        if not self.codec.finished():
            raise InvalidRequest(f"the {self.coding}-encoded request body ends before its compressed data does")

    def _check(self) -> None:
        if self.decoded_bytes > self.max_bytes:
            raise PayloadTooLarge(f"the request body decompresses to over {self.max_bytes} bytes "
                                  "(server.max_body_bytes)")
        if self.decoded_bytes > RATIO_FROM and self.decoded_bytes > self.max_ratio * self.wire_bytes:
            raise PayloadTooLarge(f"the {self.coding}-encoded request body expands more than "
                                  f"{self.max_ratio:g} times (server.max_expansion_ratio)")


def body_decoder(content_encoding: str | None, max_bytes: int, max_ratio: float) -> BodyDecoder | None:
    """The decoder for a request's Content-Encoding; None when the body is not encoded. 415 for a coding daari
    cannot decode, or for codings stacked on one another."""
    if content_encoding is None:
        return None
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip() and c.strip() != "identity"]
    if not codings:
        return None
    if len(codings) > 1:
        raise UnsupportedMediaType(f"the request body has several content codings ({content_encoding}); "
                                   f"daari decodes one of {', '.join(CODINGS)}")
    if codings[0] not in _CODECS:
        raise UnsupportedMediaType(f"the request body's content coding {codings[0]!r} is not supported; "
                                   f"daari decodes {', '.join(CODINGS)}")
    return BodyDecoder(codings[0], max_bytes, max_ratio)
