"""SemanticCacheActor: the L1 store (SQLite) and its vector index (annoy + an exact buffer).

Lookups search the index in place (well under a millisecond) and read the candidates' entries from SQLite.
Puts go to SQLite and the buffer; once `rebuild_after` entries are buffered, a new annoy index is built on
a worker thread from a snapshot and swapped in whole, while lookups go on against the old one. At start the
saved index is loaded (or, when missing or stale, rebuilt in the background: until then every entry is
searched exactly). Entries past `max_entries` or `max_age_s` are evicted.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trio

from actors.runtime import Actor, Call, handles
from daari.cache.l1_store import L1Entry, L1Store, context_id
from daari.errors import StartupError
from daari.protocol.chat import Completion
from daari.semantic.index import Candidate, Sealed, Vector, VectorIndex, load_sealed, rebuild

log = logging.getLogger("daari.l1")

SWEEP_S = 60.0  # eviction by age runs at least this often


@dataclass(frozen=True)
class Match:
    similarity: float
    entry: L1Entry


@dataclass(frozen=True)
class L1Lookup(Call[list[Match]]):
    """Candidates for `vector` within `context`, nearest first."""

    vector: Vector
    context: str
    threshold: float
    limit: int = 3


@dataclass(frozen=True)
class L1Put(Call[int]):
    """Store an answer; the reply is its row id."""

    context: str
    embed_text: str
    vector: Vector
    completion: Completion
    tier: str
    task_type: str | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class L1Count(Call[int]):
    """Entries in the index."""


@dataclass(frozen=True)
class L1Rebuild(Call[int]):
    """Rebuild the annoy index now and answer (with its size) when it is swapped in (bench and tests)."""


@dataclass
class IndexStats:
    """Shared, for /metrics and the bench: what the index holds and how rebuilds went."""

    entries: int = 0
    buffered: int = 0
    rebuilds: int = 0
    last_rebuild_s: float | None = None


class SemanticCacheActor(Actor):
    name = "l1"

    def __init__(self, data_dir: Path, *, max_entries: int, max_age_s: float, trees: int, rebuild_after: int,
                 stats: IndexStats | None = None) -> None:
        self.db_path = data_dir / "l1.sqlite"
        self.index_path = data_dir / "l1.index"  # a manifest naming the current annoy + ids files
        self.max_entries = max_entries
        self.max_age_s = max_age_s
        self.trees = trees
        self.rebuild_after = max(1, rebuild_after)
        self.stats = stats or IndexStats()
        self.store: L1Store | None = None
        self.index = VectorIndex()
        self._sqlite = trio.CapacityLimiter(1)
        self._building = trio.CapacityLimiter(1)
        self._rebuild_wanted = trio.Event()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        try:
            self.store = await trio.to_thread.run_sync(L1Store, self.db_path, limiter=self._sqlite)
        except (OSError, sqlite3.Error) as exc:
            raise StartupError(f"cannot open the L1 store {self.db_path}: {exc}; "
                               f"choose a writable directory with --data-dir") from None
        try:
            await self._load_index()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._rebuilder)
                nursery.start_soon(self._sweeper)
                yield
                nursery.cancel_scope.cancel()
        finally:
            store, self.store = self.store, None
            store.close()

    async def _load_index(self) -> None:
        """The saved index plus what the store holds beyond it; stale parts are skipped, then rebuilt."""
        assert self.store is not None
        sealed = await trio.to_thread.run_sync(load_sealed, self.index_path)
        stored = await trio.to_thread.run_sync(self.store.vectors, limiter=self._sqlite)
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

    def _counted(self) -> None:
        self.stats.entries = len(self.index)
        self.stats.buffered = self.index.buffered

    async def _rebuilder(self) -> None:
        while True:
            await self._rebuild_wanted.wait()
            self._rebuild_wanted = trio.Event()
            await self._rebuild()

    async def _rebuild(self) -> None:
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
            await self._evict()
            await trio.sleep(SWEEP_S)

    async def _evict(self) -> None:
        assert self.store is not None
        gone = await trio.to_thread.run_sync(self.store.evict, self.max_entries, self.max_age_s,
                                             limiter=self._sqlite)
        if gone:
            self.index.delete(gone)
            self._counted()

    @handles(L1Count)
    async def count(self, request: L1Count) -> int:
        return len(self.index)

    @handles(L1Rebuild)
    async def rebuild_now(self, request: L1Rebuild) -> int:
        await self._rebuild()
        return len(self.index)

    @handles(L1Lookup)
    async def lookup(self, request: L1Lookup) -> list[Match]:
        assert self.store is not None
        # A few extra in case some turn out evicted or (60-bit id collision) of another context.
        candidates: list[Candidate] = self.index.search(request.vector, context_id(request.context),
                                                        request.threshold, request.limit + 2)
        matches = []
        oldest = time.time() - self.max_age_s
        for candidate in candidates:
            entry = await trio.to_thread.run_sync(self.store.get, candidate.row_id, limiter=self._sqlite)
            if entry is None or entry.context != request.context or entry.created_at < oldest:
                continue
            matches.append(Match(candidate.similarity, entry))
            if len(matches) == request.limit:
                break
        return matches

    @handles(L1Put)
    async def put(self, request: L1Put) -> int:
        assert self.store is not None
        vector = np.asarray(request.vector, np.float32)
        row_id = await trio.to_thread.run_sync(self.store.put, request.context, request.embed_text, vector,
                                               request.completion, request.tier, request.task_type,
                                               request.confidence, limiter=self._sqlite)
        self.index.add(row_id, context_id(request.context), vector)
        if len(self.index) > self.max_entries:
            await self._evict()
        if self.index.buffered >= self.rebuild_after:
            self._rebuild_wanted.set()
        self._counted()
        return row_id
