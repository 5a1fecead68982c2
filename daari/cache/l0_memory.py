"""The in-memory front of L0: an LRU of entries bounded in bytes, plus the puts not yet on disk.

The CacheActor is its only writer. Request tasks may `peek` it synchronously: Trio runs one task at a
time and `peek` never awaits, so a read can never see a half-done write. A hit then costs no mailbox
round trip; only a miss asks the actor (which reads SQLite). It outlives CacheActor restarts. Hits are
tallied here and written to disk in the writer's next batch, not one transaction per hit.
"""

from __future__ import annotations

import time

from daari.cache.l0_store import L0Entry, entry_size
from daari.cache.lru import LRU


class L0Memory:
    def __init__(self, max_bytes: int, max_pending_bytes: int | None = None, ttl_s: float = 0.0) -> None:
        self.lru: LRU[str, L0Entry] = LRU(max_bytes)
        # Acknowledged but not yet on disk: read before SQLite so a get never misses a fresh put. Bounded:
        # past `max_pending_bytes` a put is refused (the request is served uncached) rather than queued.
        self.pending: dict[str, L0Entry] = {}
        self.pending_bytes = 0
        self.max_pending_bytes = max_pending_bytes if max_pending_bytes is not None else max(max_bytes // 4, 1)
        self.ttl_s = ttl_s
        self.hits: dict[str, int] = {}  # key -> hits since the last flush to disk

    def peek(self, key: str) -> L0Entry | None:
        entry = self.lru.get(key) or self.pending.get(key)
        if entry is None:
            return None
        if self.ttl_s and entry.created_at and time.time() - entry.created_at > self.ttl_s:
            return None  # expired: the store's sweep deletes it
        self.hits[key] = self.hits.get(key, 0) + 1
        return entry

    def has_room(self, entry: L0Entry) -> bool:
        """Whether a put of `entry` fits in the pending budget."""
        return self.pending_bytes + entry_size(entry) <= self.max_pending_bytes or not self.pending

    def cached(self, key: str, entry: L0Entry) -> None:
        """Actor only: an entry read from disk, kept in the LRU."""
        self.lru.put(key, entry, entry_size(entry))

    def remember(self, key: str, entry: L0Entry) -> None:
        """Actor only: a put, visible at once, durable once `written` is called for it."""
        size = entry_size(entry)
        self.lru.put(key, entry, size)
        previous = self.pending.get(key)
        if previous is not None:
            self.pending_bytes -= entry_size(previous)
        self.pending[key] = entry
        self.pending_bytes += size

    def written(self, key: str, entry: L0Entry) -> None:
        """Actor only: the put reached the disk, or failed to (then it lives on in the LRU only)."""
        if self.pending.get(key) is entry:
            del self.pending[key]
            self.pending_bytes -= entry_size(entry)

    def take_hits(self) -> dict[str, int]:
        hits, self.hits = self.hits, {}
        return hits
