"""Stored responses in SQLite (`responses.sqlite` in the data dir): what `previous_response_id` and
`GET /v1/responses/{id}` read. `ResponseStore` blocks (one connection); `ResponseArchive` runs it in a worker
thread behind a limiter of one, so request tasks never block the event loop and never share the connection
between threads at once.

A row holds the response object as sent (daari_meta included) and the whole input that produced it (the
previous responses' input and output already folded in), so a chain is one lookup deep. The oldest rows
beyond `keep` are pruned on write. Each row belongs to the credential partition of the caller that made it
(daari/cache/partition.py; "" is the shared one): a lookup from another partition finds nothing, exactly like
an unknown id.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from daari.datadir import private_file


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    input_items: list[dict[str, Any]]

    @property
    def output_items(self) -> list[dict[str, Any]]:
        output = self.response.get("output")
        return list(output) if isinstance(output, list) else []


class ResponseStore:
    def __init__(self, path: Path, keep: int) -> None:
        private_file(path)  # stored responses hold prompts and answers: 0600 in a 0700 directory
        self.keep = keep
        self._conn = sqlite3.connect(str(path), check_same_thread=False)
        self._conn.execute("pragma journal_mode=wal")
        self._conn.execute("create table if not exists responses (id text primary key, created_at real, "
                           "response text, input text, owner text not null default '')")
        columns = {row[1] for row in self._conn.execute("pragma table_info(responses)")}
        if "owner" not in columns:  # a store written before responses were partitioned: its rows are shared
            self._conn.execute("alter table responses add column owner text not null default ''")
        self._conn.execute("create index if not exists responses_by_age on responses (created_at)")
        self._conn.commit()

    def get(self, response_id: str, partition: str) -> StoredResponse | None:
        row = self._conn.execute("select response, input from responses where id = ? and owner = ?",
                                 (response_id, partition)).fetchone()
        if row is None:
            return None
        return StoredResponse(json.loads(row[0]), json.loads(row[1]))

    def put(self, response_id: str, stored: StoredResponse, partition: str) -> None:
        self._conn.execute("insert or replace into responses (id, created_at, response, input, owner) "
                           "values (?, ?, ?, ?, ?)",
                           (response_id, time.time(), json.dumps(stored.response, ensure_ascii=False),
                            json.dumps(stored.input_items, ensure_ascii=False), partition))
        # The oldest rows past `keep` (the index makes this a short scan from the old end).
        self._conn.execute("delete from responses where id in (select id from responses order by created_at "
                           "desc limit -1 offset ?)", (self.keep,))
        self._conn.commit()

    def delete(self, response_id: str, partition: str) -> bool:
        cursor = self._conn.execute("delete from responses where id = ? and owner = ?", (response_id, partition))
        self._conn.commit()
        return cursor.rowcount > 0

    def close(self) -> None:
        self._conn.close()


class ResponseArchive:
    """The async face of a `ResponseStore`: each call runs in a worker thread, one at a time. `partition` is
    the caller's credential partition (daari/cache/partition.py)."""

    def __init__(self, path: Path, keep: int) -> None:
        self._path = path
        self._keep = keep
        self._store: ResponseStore | None = None
        self._limiter = trio.CapacityLimiter(1)

    def _open(self) -> ResponseStore:
        if self._store is None:
            self._store = ResponseStore(self._path, self._keep)
        return self._store

    async def get(self, response_id: str, partition: str) -> StoredResponse | None:
        return await trio.to_thread.run_sync(lambda: self._open().get(response_id, partition),
                                             limiter=self._limiter)

    async def put(self, response_id: str, stored: StoredResponse, partition: str) -> None:
        await trio.to_thread.run_sync(lambda: self._open().put(response_id, stored, partition),
                                      limiter=self._limiter)

    async def delete(self, response_id: str, partition: str) -> bool:
        return await trio.to_thread.run_sync(lambda: self._open().delete(response_id, partition),
                                             limiter=self._limiter)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
