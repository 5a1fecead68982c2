"""L0 on this machine's disk (cache.backend: disk): the SQLite store behind two worker-thread limiters.

Two connections, one thread each at a time: the writer's batches, and reads (WAL: a read never waits for a write in
progress, so a disk hit is not held up by a batch of puts). A write that fails (disk full, read-only, locked) makes
puts refused for `retry_s`, then the disk is tried again.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

from daari.cache.l0_store import L0Entry, L0Reader, L0Store
from daari.cache.store import StoreUnavailable
from daari.errors import StartupError

log = logging.getLogger("daari.cache")

DISK_RETRY_S = 30.0  # after a failed disk write, puts are refused this long before trying again


class DiskL0:
    def __init__(self, db_path: Path, *, max_bytes: int = 0, ttl_s: float = 0.0, retry_s: float = DISK_RETRY_S) -> None:
        self.db_path = db_path
        self.description = str(db_path)
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.retry_s = retry_s
        self.store: L0Store | None = None
        self.reader: L0Reader | None = None
        self._write_limiter = trio.CapacityLimiter(1)
        self._read_limiter = trio.CapacityLimiter(1)
        self._failed_at = -math.inf

    async def open(self) -> None:
        try:
            self.store = await trio.to_thread.run_sync(L0Store, self.db_path, self.max_bytes, self.ttl_s,
                                                       limiter=self._write_limiter)
            self.reader = await trio.to_thread.run_sync(self.store.reader, limiter=self._read_limiter)
        except (OSError, sqlite3.Error) as exc:
            if self.store is not None:
                self.store.close()
                self.store = None
            raise StartupError(f"cannot open the L0 store {self.db_path}: {exc}; "
                               f"choose a writable directory with --data-dir") from None

    async def close(self) -> None:
        store, self.store = self.store, None
        reader, self.reader = self.reader, None
        if reader is not None:
            reader.close()
        if store is not None:
            store.close()

    def unavailable(self) -> str | None:
        if trio.current_time() - self._failed_at < self.retry_s:
            return "the L0 store's disk is failing (full or read-only?); not caching"
        return None

    async def get(self, key: str) -> L0Entry | None:
        reader = self._reader()
        try:
            return await trio.to_thread.run_sync(reader.get, key, limiter=self._read_limiter)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"the L0 store could not be read ({type(exc).__name__})") from None

    async def write(self, puts: Sequence[tuple[str, L0Entry]], hits: Mapping[str, int]) -> dict[str, L0Entry]:
        store = self.store
        if store is None:
            raise StoreUnavailable("the L0 store is not open")
        try:
            await trio.to_thread.run_sync(store.write, list(puts), hits, limiter=self._write_limiter)
        except (sqlite3.Error, OSError) as exc:
            self._failed_at = trio.current_time()
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None
        return {}  # one writer: nobody else can have stored these keys first

    async def count(self) -> int:
        reader = self._reader()
        return await trio.to_thread.run_sync(reader.count, limiter=self._read_limiter)

    def _reader(self) -> L0Reader:
        if self.reader is None:
            raise StoreUnavailable("the L0 store is not open")
        return self.reader
