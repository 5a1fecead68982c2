"""CacheActor: the one writer of L0 (SQLite and its in-memory front); reads that miss memory come here."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from actors.actor import Actor
from daari.cache.l0_memory import L0Memory
from daari.cache.l0_store import L0Entry, L0Store
from daari.errors import StartupError


@dataclass(frozen=True)
class L0Get:
    key: str


@dataclass(frozen=True)
class L0Put:
    key: str
    entry: L0Entry


@dataclass(frozen=True)
class L0Count:
    pass


class CacheActor(Actor):
    name = "cache"

    def __init__(self, db_path: Path, memory: L0Memory) -> None:
        self.db_path = db_path
        self.memory = memory  # shared with request tasks for synchronous peeks; written only here
        self.store: L0Store | None = None
        self._sqlite = trio.CapacityLimiter(1)
        self._writes: trio.MemorySendChannel[L0Put]
        self._writer_scope = trio.CancelScope()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        try:
            self.store = await trio.to_thread.run_sync(L0Store, self.db_path, limiter=self._sqlite)
        except (OSError, sqlite3.Error) as exc:
            raise StartupError(f"cannot open the L0 store {self.db_path}: {exc}; "
                               f"choose a writable directory with --data-dir") from None
        writes_send, writes_recv = trio.open_memory_channel[L0Put](1024)
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
            store.close()

    async def _writer(self, writes: trio.MemoryReceiveChannel[L0Put]) -> None:
        """Disk writes happen after the reply: a put is visible (from the LRU) before it is durable."""
        # Shielded so that a shutdown does not lose answers already acknowledged to the pipeline.
        with trio.CancelScope(shield=True) as self._writer_scope, writes:
            async for put in writes:
                assert self.store is not None
                await trio.to_thread.run_sync(self.store.put, put.key, put.entry, limiter=self._sqlite)
                self.memory.written(put.key, put.entry)

    async def handle(self, request: object) -> object:
        assert self.store is not None
        if isinstance(request, L0Get):
            entry = self.memory.peek(request.key)
            if entry is None:
                entry = await trio.to_thread.run_sync(self.store.get, request.key, limiter=self._sqlite)
                if entry is not None:
                    self.memory.lru.put(request.key, entry)
            return entry
        if isinstance(request, L0Put):
            self.memory.remember(request.key, request.entry)
            await self._writes.send(request)
            return None
        if isinstance(request, L0Count):
            return await trio.to_thread.run_sync(self.store.count, limiter=self._sqlite)
        raise TypeError(f"CacheActor cannot handle {type(request).__name__}")
