"""The in-memory front of L0: an LRU of entries plus the puts not yet on disk.

The CacheActor is its only writer. Request tasks may `peek` it synchronously: Trio runs one task at a
time and `peek` never awaits, so a read can never see a half-done write. A hit then costs no mailbox
round trip; only a miss asks the actor (which reads SQLite). It outlives CacheActor restarts.
"""

from __future__ import annotations

from daari.cache.l0_store import L0Entry
from daari.cache.lru import LRU


class L0Memory:
    def __init__(self, lru_entries: int) -> None:
        self.lru: LRU[str, L0Entry] = LRU(lru_entries)
        # Acknowledged but not yet on disk: read before SQLite so a get never misses a fresh put.
        self.pending: dict[str, L0Entry] = {}

    def peek(self, key: str) -> L0Entry | None:
        return self.lru.get(key) or self.pending.get(key)

    def remember(self, key: str, entry: L0Entry) -> None:
        """Actor only: a put, visible at once, durable once `written` is called for it."""
        self.lru.put(key, entry)
        self.pending[key] = entry

    def written(self, key: str, entry: L0Entry) -> None:
        if self.pending.get(key) is entry:
            del self.pending[key]
