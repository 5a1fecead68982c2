"""L1 on this machine's disk (cache.backend: disk): the SQLite store on one worker thread at a time, and the vector
index saved beside it (`<data_dir>/l1.index`), so a restart loads it instead of rebuilding."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import trio

from daari.cache.l1_store import L1Entry, L1Store
from daari.cache.store import Evicted, L1Shape, NewL1Entry, StoreUnavailable, VectorRows
from daari.errors import StartupError


class DiskL1:
    def __init__(self, data_dir: Path) -> None:
        self.db_path = data_dir / "l1.sqlite"
        self.description = str(self.db_path)
        self.shape = L1Shape(index_path=data_dir / "l1.index")
        self.store: L1Store | None = None
        self._sqlite = trio.CapacityLimiter(1)

    async def open(self) -> None:
        try:
            self.store = await trio.to_thread.run_sync(L1Store, self.db_path, limiter=self._sqlite)
        except (OSError, sqlite3.Error) as exc:
            raise StartupError(f"cannot open the L1 store {self.db_path}: {exc}; "
                               f"choose a writable directory with --data-dir") from None

    async def close(self) -> None:
        store, self.store = self.store, None
        if store is not None:
            store.close()

    def _store(self) -> L1Store:
        if self.store is None:
            raise StoreUnavailable("the L1 store is not open")
        return self.store

    async def put(self, entry: NewL1Entry) -> int:
        store = self._store()
        vector = np.asarray(entry.vector, np.float32)
        try:
            return await trio.to_thread.run_sync(store.put, entry.context, entry.embed_text, vector, entry.completion,
                                                 entry.tier, entry.task_type, entry.confidence, limiter=self._sqlite)
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"the L1 store could not be written ({type(exc).__name__})") from None

    async def get_many(self, ids: Sequence[int]) -> dict[int, L1Entry]:
        store = self._store()
        found: dict[int, L1Entry] = {}
        try:
            for row_id in ids:
                entry = await trio.to_thread.run_sync(store.get, row_id, limiter=self._sqlite)
                if entry is not None:
                    found[row_id] = entry
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"the L1 store could not be read ({type(exc).__name__})") from None
        return found

    async def vectors(self) -> VectorRows:
        return VectorRows(await trio.to_thread.run_sync(self._store().vectors, limiter=self._sqlite))

    async def evict(self, max_entries: int, max_age_s: float) -> Evicted:
        gone = await trio.to_thread.run_sync(self._store().evict, max_entries, max_age_s, limiter=self._sqlite)
        return Evicted(ids=gone)

    async def demote(self, entry_id: int) -> bool:
        return await trio.to_thread.run_sync(self._store().demote, entry_id, limiter=self._sqlite)

    async def count(self) -> int:
        return await trio.to_thread.run_sync(self._store().count, limiter=self._sqlite)

    async def follow(self, position: str) -> AsyncIterator[VectorRows]:
        """Only this daari writes here: nothing to follow."""
        await trio.sleep_forever()
        yield VectorRows(self._store().vectors())  # never reached: makes this an async generator
