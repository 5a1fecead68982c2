"""CPU off the event loop: a large request body is decoded, validated and hashed on a worker thread.

Below `server.thread_parse_bytes` the work runs inline (a thread hop costs more than parsing a small body);
at or above it, on a worker thread under a limiter, so that one 8 MiB body does not stall every open
stream and every cached answer while it is parsed (bench/large_bodies.py, docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import trio

from daari.errors import InvalidRequest
from daari.jsonio import ENCODE_DEPTH, loads, within_encode_depth

T = TypeVar("T")

THREADS = 2  # bodies parsed at once off the loop; more only queue for the same two cores
# How deep a request body may nest arrays and objects: orjson's encoding limit. Real requests nest a few dozen
# levels at most (a tool's JSON schema). Every body daari parses is encoded again (the cache key, an upstream
# body a level or two deeper after translation), in C up to this depth and by the stdlib fallback a little past
# it; orjson would parse up to 1024 levels, where the stdlib's encoder and any recursive walk hit Python's limit.
MAX_BODY_DEPTH = ENCODE_DEPTH


class BodyWork:
    def __init__(self, threshold_bytes: int, threads: int = THREADS) -> None:
        self.threshold_bytes = threshold_bytes
        self.limiter = trio.CapacityLimiter(threads)

    def heavy(self, size: int) -> bool:
        """Whether a body of `size` bytes is worth a worker thread (0 turns threads off)."""
        return 0 < self.threshold_bytes <= size

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on a worker thread, for a `heavy` body (small ones call `fn` inline: no coroutine, no
        checkpoint). The thread finishes even if the client leaves."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)


def decode_json(raw: bytes) -> Any:
    try:
        body = loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"request body is not valid JSON: {exc}") from None
    # One encode in C: 0.4 us for a small chat body (bench/hit_steps.py), ~55 us for 128 KB that took ~400 us to
    # parse. Counting brackets first, to skip it, costs more than the check.
    if not within_encode_depth(body):
        raise InvalidRequest(f"request body is nested more than {MAX_BODY_DEPTH} levels deep")
    return body
