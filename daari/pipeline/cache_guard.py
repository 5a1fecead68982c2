"""L0 reads and writes for one request, where a cache that fails is bypassed, never fatal.

The CacheActor down (crashed, given up, overloaded) or its disk failing (full, read-only): the request is
routed as if the cache were off, `daari_meta.cache` says "bypassed", and `cache_bypassed_total{op}` counts
it. A write that fails after a streamed answer never turns into an error event.
"""

from __future__ import annotations

import logging
import time

from actors.cache import L0Get, L0Put
from daari.cache.l0_store import L0Entry
from daari.errors import DaariError
from daari.pipeline.meta import Meta
from daari.pipeline.runtime import Runtime

log = logging.getLogger("daari.cache")

WARN_EVERY_S = 10.0  # a failing cache fails every request: one warning per this long is enough
_last_warning = 0.0


class CacheGuard:
    __slots__ = ("rt", "meta")

    def __init__(self, rt: Runtime, meta: Meta) -> None:
        self.rt = rt
        self.meta = meta

    async def get(self, key: str) -> L0Entry | None:
        """The entry for `key` from memory, else from the CacheActor; None on a miss or a failing cache."""
        entry = self.rt.l0_memory.peek(key)
        if entry is not None:
            return entry
        try:
            found: L0Entry | None = await self.rt.cache.call(L0Get(key))
        except DaariError as err:
            self._bypassed("read", err)
            return None
        return found

    async def put(self, key: str, entry: L0Entry) -> bool:
        """Store `entry`; False (and the request marked bypassed) when the cache cannot take it."""
        try:
            await self.rt.cache.call(L0Put(key, entry))
        except DaariError as err:
            self._bypassed("write", err)
            return False
        return True

    def _bypassed(self, op: str, err: DaariError) -> None:
        global _last_warning
        self.meta.cache = "bypassed"
        self.rt.metrics.inc("cache_bypassed_total", op=op)
        now = time.monotonic()
        if now - _last_warning >= WARN_EVERY_S:
            _last_warning = now
            log.warning("L0 cache bypassed (%s failed: %s); requests are routed as if the cache were off",
                        op, err.message)
