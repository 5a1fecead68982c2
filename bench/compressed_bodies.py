"""`python -m bench.compressed_bodies`: what a compressed request body costs daari, and what a bomb costs it.

The body goes through `server/asgi_io.read_body` (the function every route reads with) fed in 64 KiB ASGI
messages, as Hypercorn hands them over, with no sockets: the figures are daari's own decoding. For each
coding: a decompression bomb (128 MiB of zeros), a 1 MiB chat body of varied text, and 1 MiB of one chunk of
code repeated (the most compressible body that still looks real), with each one's expansion ratio, the peak of
Python allocations during the read (tracemalloc) and the time, one run.
"""

from __future__ import annotations

import json
import random
import time
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import brotli  # type: ignore[import-untyped]
import trio
from backports import zstd

from bench.report import Table, print_tables
from daari.config import ServerConfig
from daari.errors import DaariError
from daari.server.asgi_io import read_body
from daari.server.limits import RequestLimits

MESSAGE = 64 * 1024
BOMB = 128 << 20


def _gzip(chunks: list[bytes]) -> bytes:
    encoder = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join(encoder.compress(c) for c in chunks) + encoder.flush()


def _deflate(chunks: list[bytes]) -> bytes:
    encoder = zlib.compressobj(6)
    return b"".join(encoder.compress(c) for c in chunks) + encoder.flush()


def _br(chunks: list[bytes]) -> bytes:
    encoder = brotli.Compressor(quality=5)
    return b"".join(encoder.process(c) for c in chunks) + encoder.finish()


def _zstd(chunks: list[bytes]) -> bytes:
    encoder = zstd.ZstdCompressor(level=3)
    return b"".join(encoder.compress(c) for c in chunks) + encoder.flush()


ENCODERS: dict[str, Callable[[list[bytes]], bytes]] = {"gzip": _gzip, "deflate": _deflate, "br": _br,
                                                      "zstd": _zstd}


async def _read(wire: bytes, coding: str | None, limits: RequestLimits) -> tuple[str, float, float]:
    """(outcome, peak MiB allocated, ms) for one body read by read_body."""
    messages = [wire[i:i + MESSAGE] for i in range(0, len(wire), MESSAGE)] or [b""]
    position = 0

    async def receive() -> dict[str, Any]:
        nonlocal position
        position += 1
        return {"type": "http.request", "body": messages[position - 1], "more_body": position < len(messages)}

    headers = {"content-encoding": coding} if coding else {}
    tracemalloc.start()
    started = time.perf_counter()
    try:
        body = await read_body(receive, headers, limits)
        outcome = f"read, {len(body) / (1 << 20):.1f} MiB"
    except DaariError as err:
        outcome = f"{err.status} {err.code}"
    elapsed = (time.perf_counter() - started) * 1000
    peak = tracemalloc.get_traced_memory()[1] / (1 << 20)
    tracemalloc.stop()
    return outcome, peak, elapsed


def varied_chat(mib: float) -> bytes:
    """A chat body of about `mib` MiB whose text varies (code-like lines of random words): it compresses about
    as much as a real conversation, not as much as one chunk repeated."""
    words = ("event", "context", "status", "body", "return", "handler", "request", "user", "cache", "value",
             "import", "self", "config", "result", "error", "client", "stream", "token", "path", "data")
    rng = random.Random(1)
    lines = [f"    {rng.choice(words)}_{rng.randrange(1000)} = {rng.choice(words)}({rng.randrange(10**6)})"
             for _ in range(int(mib * (1 << 20) / 40))]
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "\n".join(lines[i:i + 200])}
                for i in range(0, len(lines), 200)]
    return json.dumps({"model": "good", "messages": messages}).encode()


def repeated_chat(mib: float) -> bytes:
    """The worst real-looking case we could make: one 80-line chunk of code repeated for `mib` MiB."""
    chunk = "def handler(event, context):\n    return {'status': 200, 'body': event['body']}\n" * 80
    count = int(mib * (1 << 20) / len(chunk))
    return json.dumps({"model": "good", "messages": [{"role": "user", "content": chunk}] * count}).encode()


def run() -> list[Table]:
    limits = RequestLimits.from_config(ServerConfig())
    zeros = [bytes(1 << 20)] * (BOMB >> 20)
    bodies = {"1 MiB chat body": varied_chat(1.0), "1 MiB of one chunk repeated": repeated_chat(1.0)}
    table = Table("Compressed request bodies read by daari (read_body, 64 KiB messages, no sockets)",
                  ["coding", "body", "on the wire", "outcome", "peak Python memory (MiB)", "ms"])
    for name, body in bodies.items():
        outcome, peak, ms = trio.run(_read, body, None, limits)
        table.add("none", name, f"{len(body) / 1024:.0f} KiB", outcome, peak, ms)
    for coding, encode in ENCODERS.items():
        bomb = encode(zeros)
        outcome, peak, ms = trio.run(_read, bomb, coding, limits)
        table.add(coding, "bomb: 128 MiB of zeros", f"{len(bomb) / 1024:.1f} KiB", outcome, peak, ms)
        for name, body in bodies.items():
            wire = encode([body])
            outcome, peak, ms = trio.run(_read, wire, coding, limits)
            table.add(coding, f"{name} (x{len(body) / len(wire):.0f})", f"{len(wire) / 1024:.1f} KiB", outcome,
                      peak, ms)
    table.notes.append(f"limits: server.max_body_bytes {limits.max_body_bytes >> 20} MiB, "
                       f"server.max_expansion_ratio {limits.max_expansion_ratio:g}")
    table.notes.append("peak memory includes the body daari keeps (the decoded bytes, then their join)")
    return [table]


def main() -> None:
    print_tables(run())


if __name__ == "__main__":
    main()
