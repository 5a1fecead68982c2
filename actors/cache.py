"""CacheActor: the one writer of L0 (SQLite and its in-memory front); reads that miss memory come here.

A failing disk (full, read-only, locked) never crashes it: a read that fails and a put it cannot take
are answered `CacheUnavailable`, which the request path turns into a bypass (pipeline/cache_guard.py).
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from actors.runtime import Actor, Call, handles
from daari.cache.l0_memory import L0Memory
from daari.cache.l0_store import L0Entry, L0Reader, L0Store
from daari.errors import DaariError, StartupError
from daari.metrics import Metrics

log = logging.getLogger("daari.cache")

BATCH = 256  # puts written in one transaction at most
FLUSH_S = 30.0  # the hit tally and the age sweep run at least this often
SWEEP_S = 600.0  # with a ttl, expired entries are deleted at least this often (they are never served)
DISK_RETRY_S = 30.0  # after a failed disk write, puts are refused this long before trying again


class CacheUnavailable(DaariError):
    status = 503
    code = "cache_unavailable"


@dataclass(frozen=True)
class L0Get(Call[L0Entry | None]):
    key: str


@dataclass(frozen=True)
class L0Put(Call[None]):
    """Answered once the entry is in memory (visible to every request); the disk write follows."""

    key: str
    entry: L0Entry


@dataclass(frozen=True)
class L0Count(Call[int]):
    """Entries on disk."""


class CacheActor(Actor):
    name = "cache"

    def __init__(self, db_path: Path, memory: L0Memory, *, max_disk_bytes: int = 0, ttl_s: float = 0.0,
                 metrics: Metrics | None = None) -> None:
        self.db_path = db_path
        self.memory = memory  # shared with request tasks for synchronous peeks; written only here
        self.max_disk_bytes = max_disk_bytes
        self.ttl_s = ttl_s
        self.metrics = metrics or Metrics()
        self.store: L0Store | None = None
        self.reader: L0Reader | None = None
        # Two connections, one thread each at a time: the writer's batches, and reads (WAL: a read never waits
        # for a write in progress, so an L0 disk hit is not held up by a batch of puts).
        self._write_limiter = trio.CapacityLimiter(1)
        self._read_limiter = trio.CapacityLimiter(1)
        self._writes: trio.MemorySendChannel[L0Put]
        self._writer_scope = trio.CancelScope()
        self._disk_failed_at = -math.inf
        self._swept_at = -math.inf

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        try:
            self.store = await trio.to_thread.run_sync(L0Store, self.db_path, self.max_disk_bytes, self.ttl_s,
                                                       limiter=self._write_limiter)
            self.reader = await trio.to_thread.run_sync(self.store.reader, limiter=self._read_limiter)
        except (OSError, sqlite3.Error) as exc:
            if self.store is not None:
                self.store.close()
            raise StartupError(f"cannot open the L0 store {self.db_path}: {exc}; "
                               f"choose a writable directory with --data-dir") from None
        # Unbounded in count: what is queued is bounded by the memory's pending budget (see handle).
        writes_send, writes_recv = trio.open_memory_channel[L0Put](math.inf)
        self._writes = writes_send
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer, writes_recv)
                try:
                    yield
                finally:
                    # Stopping or crashing: the writer drains what is queued (bounded), then ends.
                    writes_send.close()
                    self._writer_scope.deadline = trio.current_time() + 5
        finally:
            store, self.store = self.store, None
            reader, self.reader = self.reader, None
            reader.close()
            store.close()

    async def _writer(self, writes: trio.MemoryReceiveChannel[L0Put]) -> None:
        """Disk writes happen after the reply, in batches: a put is visible (from memory) before it is durable."""
        # Shielded so that a shutdown does not lose answers already acknowledged to the pipeline.
        with trio.CancelScope(shield=True) as self._writer_scope, writes:
            await self._write([])  # the age sweep at start
            while True:
                batch: list[L0Put] = []
                with trio.move_on_after(FLUSH_S):
                    try:
                        batch.append(await writes.receive())
                    except trio.EndOfChannel:
                        await self._write([])  # the last hit tally
                        return
                while len(batch) < BATCH:
                    try:
                        batch.append(writes.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await self._write(batch)

    async def _write(self, batch: list[L0Put]) -> None:
        assert self.store is not None
        sweep_due = self.ttl_s and trio.current_time() - self._swept_at >= SWEEP_S
        if not batch and not self.memory.hits and not sweep_due:
            return
        if sweep_due:
            self._swept_at = trio.current_time()
        hits = self.memory.take_hits()
        try:
            await trio.to_thread.run_sync(self.store.write, [(p.key, p.entry) for p in batch], hits,
                                          limiter=self._write_limiter)
        except (sqlite3.Error, OSError) as exc:
            self._disk_failed_at = trio.current_time()
            self.metrics.inc("cache_write_failures_total", amount=max(len(batch), 1))
            log.warning("L0 store %s: a write failed (%s: %s); %d answers stay in memory only, new ones are "
                        "not cached for %gs", self.db_path, type(exc).__name__, exc, len(batch), DISK_RETRY_S)
        finally:
            for put in batch:
                self.memory.written(put.key, put.entry)

    def _reader(self) -> L0Reader:
        assert self.reader is not None, "used only between lifespan's start and end"
        return self.reader

    @handles(L0Get)
    async def get(self, request: L0Get) -> L0Entry | None:
        entry = self.memory.peek(request.key)
        if entry is None:
            entry = await self._read(request.key)
        return entry

    @handles(L0Put)
    async def put(self, request: L0Put) -> None:
        if trio.current_time() - self._disk_failed_at < DISK_RETRY_S:
            raise CacheUnavailable("the L0 store's disk is failing (full or read-only?); not caching")
        if not self.memory.has_room(request.entry):
            self.metrics.inc("cache_write_queue_full_total")
            raise CacheUnavailable("the L0 store's write queue is full; not caching this answer")
        self.memory.remember(request.key, request.entry)
        self._writes.send_nowait(request)

    @handles(L0Count)
    async def count(self, request: L0Count) -> int:
        return await trio.to_thread.run_sync(self._reader().count, limiter=self._read_limiter)

    async def _read(self, key: str) -> L0Entry | None:
        try:
            entry = await trio.to_thread.run_sync(self._reader().get, key, limiter=self._read_limiter)
        except (sqlite3.Error, OSError) as exc:
            raise CacheUnavailable(f"the L0 store could not be read ({type(exc).__name__})") from None
        if entry is not None:
            self.memory.cached(key, entry)
            self.memory.hits[key] = self.memory.hits.get(key, 0) + 1
        return entry
