"""One L1 vector index over one L1 store: the annoy index plus its exact buffer, its rebuilds, evictions and (a
shared store) the follower of the store's stream. The SemanticCacheActor runs one (the local L1); the L1-org actor
runs one per tenant it holds (actors/org_l1.py).

Lookups search the index in place (well under a millisecond) and read the candidates' entries from the store.
Puts go to the store and the buffer; once `rebuild_after` entries are buffered, a new annoy index is built on
a worker thread from a snapshot and swapped in whole, while lookups go on against the old one. On disk, the
saved index is loaded at start (or, when missing or stale, rebuilt in the background: until then every entry is
searched exactly). A shared store (Redis) is read whole when it first answers, and then followed: entries other
daari store arrive through its stream and are buffered here like this daari's own. Entries past `max_entries` or
`max_age_s` are evicted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trio

from actors.cache import CacheUnavailable
from daari.cache.l1_disk import DiskL1
from daari.cache.l1_store import L1Entry, StoredVectors, context_id
from daari.cache.store import L1Backend, NewL1Entry, StoreUnavailable, VectorRows
from daari.semantic.index import Candidate, Sealed, Vector, VectorIndex, load_sealed, rebuild

log = logging.getLogger("daari.l1")

SWEEP_S = 60.0  # eviction by age runs at least this often


@dataclass(frozen=True)
class Match:
    similarity: float
    entry: L1Entry


@dataclass
class IndexStats:
    """Shared, for /metrics and the bench: what the index holds and how rebuilds went."""

    entries: int = 0
    buffered: int = 0
    rebuilds: int = 0
    last_rebuild_s: float | None = None


class L1Index:
    def __init__(self, store: L1Backend | Path, *, max_entries: int, max_age_s: float, trees: int, rebuild_after: int,
                 stats: IndexStats | None = None) -> None:
        """`store`: the L1 store, or a data dir for the disk store (`<data_dir>/l1.sqlite`, `l1.index`)."""
        self.store: L1Backend = DiskL1(store) if isinstance(store, Path) else store
        self.index_path = self.store.shape.index_path  # a manifest naming the current annoy + ids files; None: none
        self.max_entries = max_entries
        self.max_age_s = max_age_s
        self.trees = trees
        self.rebuild_after = max(1, rebuild_after)
        self.stats = stats or IndexStats()
        self.index = VectorIndex()
        self.loaded = trio.Event()  # set once the index holds what the store held when it first answered
        self._seen: set[int] = set()  # a shared store: ids indexed here (its stream also brings this daari's own)
        self._building = trio.CapacityLimiter(1)
        self._rebuild_wanted = trio.Event()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self.store.open()
        try:
            if not self.store.shape.shared:
                await self._load_index()
                self.loaded.set()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._rebuilder)
                nursery.start_soon(self._sweeper)
                if self.store.shape.shared:
                    nursery.start_soon(self._follow)
                yield
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await self.store.close()

    async def _load_index(self) -> None:
        """The saved index plus what the store holds beyond it; stale parts are skipped, then rebuilt."""
        sealed = (await trio.to_thread.run_sync(load_sealed, self.index_path)
                  if self.index_path is not None else None)
        stored = (await self.store.vectors()).rows
        sealed = sealed or Sealed.empty()
        self.index = VectorIndex(sealed)
        in_index = set(sealed.row_ids.tolist())
        in_store = set(stored.row_ids.tolist())
        self.index.delete(list(in_index - in_store))
        for row_id, context, vector in zip(stored.row_ids, stored.contexts, stored.vectors, strict=True):
            if int(row_id) not in in_index:
                self.index.add(int(row_id), int(context), vector)
        self._counted()
        if self.index.buffered:
            log.info("L1: %d entries (%d searched exactly until the index is rebuilt)", len(self.index),
                     self.index.buffered)
            self._rebuild_wanted.set()

    async def _follow(self) -> None:
        """A shared store: everything it holds once it answers (the index is rebuilt from it), then what any daari
        stores after that, as it comes."""
        first = True
        async for rows in self.store.follow(""):
            added = self._add_rows(rows)
            if added and (first or self.index.buffered >= self.rebuild_after):
                self._rebuild_wanted.set()
            if first:
                first = False
                self.loaded.set()
                log.info("L1: %d entries in %s", len(self.index), self.store.description)
            self._counted()

    def _add_rows(self, rows: VectorRows) -> int:
        stored: StoredVectors = rows.rows
        added = 0
        for row_id, context, vector in zip(stored.row_ids, stored.contexts, stored.vectors, strict=True):
            entry_id = int(row_id)
            if entry_id in self._seen:
                continue
            self._seen.add(entry_id)
            self.index.add(entry_id, int(context), vector)
            added += 1
        return added

    def _counted(self) -> None:
        self.stats.entries = len(self.index)
        self.stats.buffered = self.index.buffered

    async def _rebuilder(self) -> None:
        while True:
            await self._rebuild_wanted.wait()
            self._rebuild_wanted = trio.Event()
            await self.rebuild()

    async def rebuild(self) -> None:
        """A new annoy index from what is indexed now, swapped in when built (lookups go on meanwhile)."""
        async with self._building:
            snapshot = self.index.snapshot()
            started = time.monotonic()
            sealed = await trio.to_thread.run_sync(rebuild, snapshot, self.trees, self.index_path,
                                                   abandon_on_cancel=True)
            self.index.swap(sealed, snapshot.covered)
            self.stats.rebuilds += 1
            self.stats.last_rebuild_s = round(time.monotonic() - started, 3)
            self._counted()

    async def _sweeper(self) -> None:
        while True:
            try:
                await self._evict()
            except StoreUnavailable as exc:
                log.debug("L1 eviction skipped: %s", exc)
            await trio.sleep(SWEEP_S)

    async def _evict(self) -> None:
        known = self.index.max_id()  # ids indexed before the pass: a shared store's answer covers these only
        evicted = await self.store.evict(self.max_entries, self.max_age_s)
        gone = list(evicted.ids)
        if evicted.below is not None:
            bound = known + 1 if evicted.below < 0 else min(evicted.below, known + 1)
            gone += self.index.ids_below(bound)
        if gone:
            self.index.delete(gone)
            self._seen.difference_update(gone)
            self._counted()

    def __len__(self) -> int:
        return len(self.index)

    async def lookup(self, vector: Vector, context: str, threshold: float, limit: int) -> list[Match]:
        """Candidates for `vector` within `context`, nearest first. Safe to run concurrently: the index search runs
        without an await; only reading the candidates' entries waits (Redis answers many at once, the disk store
        serializes them on its own limiter)."""
        # A few extra in case some turn out evicted or (60-bit id collision) of another context.
        candidates: list[Candidate] = self.index.search(vector, context_id(context), threshold, limit + 2)
        if not candidates:
            return []
        try:
            entries = await self.store.get_many([c.row_id for c in candidates])
        except StoreUnavailable as exc:
            raise CacheUnavailable(str(exc)) from None
        matches = []
        oldest = time.time() - self.max_age_s
        for candidate in candidates:
            entry = entries.get(candidate.row_id)
            if entry is None or entry.context != context or entry.created_at < oldest:
                continue
            matches.append(Match(candidate.similarity, entry))
            if len(matches) == limit:
                break
        return matches

    def may_hold(self, context: str) -> bool:
        """False only when no live entry has `context` (the index has loaded what its store held): a certain miss."""
        return not self.loaded.is_set() or self.index.census.may_hold(context_id(context))

    async def demote(self, entry_id: int) -> bool:
        try:
            demoted = await self.store.demote(entry_id)
        except StoreUnavailable as exc:
            raise CacheUnavailable(str(exc)) from None
        self.index.delete([entry_id])  # gone from lookups now; the store keeps it out of rebuilds
        self._counted()
        return demoted

    async def put(self, entry: NewL1Entry) -> int:
        """Store `entry` and index it; its row id."""
        vector = np.asarray(entry.vector, np.float32)
        try:
            row_id = await self.store.put(entry)
        except StoreUnavailable as exc:
            raise CacheUnavailable(str(exc)) from None
        if row_id not in self._seen:
            self._seen.add(row_id)
            self.index.add(row_id, context_id(entry.context), vector)
        if not self.store.shape.shared and len(self.index) > self.max_entries:
            await self._evict()
        if self.index.buffered >= self.rebuild_after:
            self._rebuild_wanted.set()
        self._counted()
        return row_id
