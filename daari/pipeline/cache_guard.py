"""L0 reads and writes through the CacheActor, where a cache that fails is bypassed, never fatal.

The CacheActor down (crashed, given up, overloaded) or its disk failing (full, read-only): the request is
routed as if the cache were off, `daari_meta.cache` says "bypassed", and `cache_bypassed_total{op}` counts
it. A write that fails after a streamed answer never turns into an error event.
"""

from __future__ import annotations

import logging
import time

from actors.cache import L0Get, L0Put
from actors.runtime import Address
from daari.cache.l0_store import L0Entry
from daari.errors import DaariError
from daari.metrics import Metrics
from daari.pipeline.meta import Meta

log = logging.getLogger("daari.cache")

WARN_EVERY_S = 10.0  # a failing cache fails every request: one warning per this long is enough


class CacheGuard:
    def __init__(self, cache: Address, metrics: Metrics) -> None:
        self.cache = cache
        self.metrics = metrics
        self._last_warning = -WARN_EVERY_S

    async def read(self, key: str, meta: Meta) -> L0Entry | None:
        """The entry for `key` from the CacheActor (its disk; the caller peeked L0's memory already); None on
        a miss or a failing cache."""
        try:
            found: L0Entry | None = await self.cache.call(L0Get(key))
        except DaariError as err:
            self._bypassed("read", err, meta)
            return None
        return found

    async def put(self, key: str, entry: L0Entry, meta: Meta) -> bool:
        """Store `entry`; False (and the request marked bypassed) when the cache cannot take it."""
        try:
            await self.cache.call(L0Put(key, entry))
        except DaariError as err:
            self._bypassed("write", err, meta)
            return False
        return True

    def _bypassed(self, op: str, err: DaariError, meta: Meta) -> None:
        meta.cache = "bypassed"
        self.metrics.inc("cache_bypassed_total", op=op)
        now = time.monotonic()
        if now - self._last_warning >= WARN_EVERY_S:
            self._last_warning = now
            log.warning("L0 cache bypassed (%s failed: %s); requests are routed as if the cache were off",
                        op, err.message)
