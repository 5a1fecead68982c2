"""L0 in Redis (cache.backend: redis), shared by every daari with the same Redis and key prefix.

One string per entry, `<prefix>l0:<L0 key>`, holding the entry as JSON (daari/cache/entry_codec.py) and expiring
`ttl_s` after it was made. A put is `SET key value NX GET PXAT ...`: one atomic command that stores the entry only
when no daari stored that key first, and otherwise answers with the entry that stays. Two daari that answered the
same request at once therefore never clobber each other: the first put wins, the second learns the winner and shows
it from memory too. Redis bounds the bytes (its `maxmemory` and eviction policy, docs/redis.md); a hit served
from a daari's memory front is TOUCHed with the next batch, so Redis's LRU sees it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from coredis.tokens import PureToken

from daari.cache.entry_codec import BadEntry, l0_from_bytes, l0_to_bytes
from daari.cache.l0_store import L0Entry
from daari.cache.redis_link import Client, RedisLink

log = logging.getLogger("daari.cache")

COUNT_TIMEOUT_S = 10.0  # counting scans every key of the prefix: for tests and benches, not requests


class RedisL0:
    def __init__(self, link: RedisLink, prefix: str, ttl_s: float = 0.0) -> None:
        self.link = link
        self.prefix = prefix + "l0:"
        self.ttl_s = ttl_s
        self.description = f"{link.settings.shown} {self.prefix}*"

    async def open(self) -> None:
        """The link is opened by its owner (the RedisActor); Redis being down now is not a reason to stop."""

    async def close(self) -> None:
        pass

    def unavailable(self) -> str | None:
        return None if self.link.up else f"Redis at {self.link.settings.shown} is {self.link.state}; not caching"

    async def get(self, key: str) -> L0Entry | None:
        data = await self.link.run(lambda client: client.get(self.prefix + key))
        if data is None:
            return None
        try:
            return l0_from_bytes(data)
        except BadEntry as exc:
            log.warning("L0 entry in Redis skipped: %s", exc)
            return None

    async def write(self, puts: Sequence[tuple[str, L0Entry]], hits: Mapping[str, int]) -> dict[str, L0Entry]:
        if not puts and not hits:
            return {}
        now = time.time()
        for _, entry in puts:
            entry.created_at = entry.created_at or now  # what expiry counts from, on every daari alike
        encoded = [(self.prefix + key, l0_to_bytes(entry), self._expiry_ms(entry)) for key, entry in puts]
        touched = [self.prefix + key for key in hits]

        async def write_batch(client: Client) -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                answers = [pipe.set(key, value, condition=PureToken.NX, get=True, pxat=expiry) if expiry
                           else pipe.set(key, value, condition=PureToken.NX, get=True)
                           for key, value, expiry in encoded]
                if touched:
                    pipe.touch(touched)
            return [await answer for answer in answers]

        previous = await self.link.run(write_batch)
        kept: dict[str, L0Entry] = {}
        for (key, _), old in zip(puts, previous, strict=True):
            if old is None:
                continue  # stored: no daari had this key
            try:
                kept[key] = l0_from_bytes(old)
            except BadEntry:
                continue
        return kept

    async def count(self) -> int:
        async def scan(client: Client) -> int:
            return sum([1 async for _ in client.scan_iter(match=self.prefix + "*", count=1000)])

        return await self.link.run(scan, timeout_s=COUNT_TIMEOUT_S)

    def _expiry_ms(self, entry: L0Entry) -> int | None:
        if not self.ttl_s:
            return None
        return int((entry.created_at + self.ttl_s) * 1000)


