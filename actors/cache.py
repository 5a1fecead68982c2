"""CacheActor: the one writer of L0 (its store and the in-memory front); reads that miss memory come here.

The store is the disk (SQLite, daari/cache/l0_disk.py) or Redis shared with other daari (daari/cache/l0_redis.py),
behind the same interface (daari/cache/store.py). A store that fails (a full or read-only disk, Redis down or slow)
never crashes the actor: a read that fails and a put it cannot take are answered `CacheUnavailable`, which the
request path turns into a bypass (pipeline/cache_guard.py).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from actors.runtime import Actor, Call, handles
from daari.cache.l0_disk import DiskL0
from daari.cache.l0_memory import L0Memory
from daari.cache.l0_store import L0Entry
from daari.cache.store import L0Backend, StoreUnavailable
from daari.errors import DaariError
from daari.metrics import Metrics

log = logging.getLogger("daari.cache")

BATCH = 256  # puts written in one transaction (or one Redis pipeline) at most
FLUSH_S = 30.0  # the hit tally and the age sweep run at least this often
SWEEP_S = 600.0  # with a ttl, expired entries are deleted at least this often (they are never served)


class CacheUnavailable(DaariError):
    status = 503
    code = "cache_unavailable"


@dataclass(frozen=True)
class L0Get(Call[L0Entry | None]):
    key: str


@dataclass(frozen=True)
class L0Put(Call[None]):
    """Answered once the entry is in memory (visible to every request); the store's write follows."""

    key: str
    entry: L0Entry


@dataclass(frozen=True)
class L0Count(Call[int]):
    """Entries in the store."""


class CacheActor(Actor):
    name = "cache"

    def __init__(self, store: L0Backend | Path, memory: L0Memory, *, max_disk_bytes: int = 0, ttl_s: float = 0.0,
                 metrics: Metrics | None = None) -> None:
        """`store`: the L0 store, or the path of an SQLite file for the disk store (`max_disk_bytes`, `ttl_s`)."""
        self.store: L0Backend = (DiskL0(store, max_bytes=max_disk_bytes, ttl_s=ttl_s) if isinstance(store, Path)
                                 else store)
        self.memory = memory  # shared with request tasks for synchronous peeks; written only here
        self.ttl_s = ttl_s
        self.metrics = metrics or Metrics()
        self._writes: trio.MemorySendChannel[L0Put]
        self._writer_scope = trio.CancelScope()
        self._swept_at = -math.inf

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        await self.store.open()
        # Unbounded in count: what is queued is bounded by the memory's pending budget (see put).
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
            with trio.CancelScope(shield=True):
                await self.store.close()

    async def _writer(self, writes: trio.MemoryReceiveChannel[L0Put]) -> None:
        """Store writes happen after the reply, in batches: a put is visible (from memory) before it is durable."""
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
        sweep_due = self.ttl_s and trio.current_time() - self._swept_at >= SWEEP_S
        if not batch and not self.memory.hits and not sweep_due:
            return
        if sweep_due:
            self._swept_at = trio.current_time()
        hits = self.memory.take_hits()
        try:
            kept = await self.store.write([(p.key, p.entry) for p in batch], hits)
        except StoreUnavailable as exc:
            self.metrics.inc("cache_write_failures_total", amount=max(len(batch), 1))
            log.warning("L0 store %s: a write failed (%s); %d answers stay in memory only", self.store.description,
                        exc, len(batch))
            kept = {}
        finally:
            for put in batch:
                self.memory.written(put.key, put.entry)
        for key, entry in kept.items():
            # Another daari stored this key first: its entry stays, and this memory now shows the same one.
            self.metrics.inc("cache_put_conflicts_total")
            self.memory.cached(key, entry)

    @handles(L0Get, concurrent=True)
    async def get(self, request: L0Get) -> L0Entry | None:
        # Concurrent: a store on the network (Redis) answers many lookups at once; the disk store serializes its
        # reads on its own limiter. Safe beside puts: memory is written without an await in between.
        entry = self.memory.peek(request.key)
        if entry is None:
            entry = await self._read(request.key)
        return entry

    @handles(L0Put)
    async def put(self, request: L0Put) -> None:
        reason = self.store.unavailable()
        if reason is not None:
            raise CacheUnavailable(reason)
        if not self.memory.has_room(request.entry):
            self.metrics.inc("cache_write_queue_full_total")
            raise CacheUnavailable("the L0 store's write queue is full; not caching this answer")
        self.memory.remember(request.key, request.entry)
        self._writes.send_nowait(request)

    @handles(L0Count)
    async def count(self, request: L0Count) -> int:
        try:
            return await self.store.count()
        except StoreUnavailable as exc:
            raise CacheUnavailable(str(exc)) from None

    async def _read(self, key: str) -> L0Entry | None:
        try:
            entry = await self.store.get(key)
        except StoreUnavailable as exc:
            raise CacheUnavailable(str(exc)) from None
        if entry is not None:
            self.memory.cached(key, entry)
            self.memory.hits[key] = self.memory.hits.get(key, 0) + 1
        return entry
