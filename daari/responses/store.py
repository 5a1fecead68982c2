"""Stored responses in SQLite (`responses.sqlite` in the data dir): what `previous_response_id` and
`GET /v1/responses/{id}` read. `ResponseStore` blocks (one connection); `ResponseArchive` runs it in a worker
thread behind a limiter of one, so request tasks never block the event loop and never share the connection
between threads at once.

A row holds the response object as sent (daari_meta included) and the input that produced it. A response that
continued a stored one holds only its own input and the id of the one it continued: each turn of a chain is
stored once, and a lookup walks the chain back (one query) to give the whole input again. A row without a
previous id holds its whole input (a first turn, a row from an older daari, or one whose previous response was
gone by the time it was written).

Each row belongs to the credential partition of the caller that made it (daari/cache/partition.py; "" is the
shared one): a lookup from another partition finds nothing, exactly like an unknown id. Pruning stays inside a
partition: past `keep` rows in one, its oldest go, so one key's traffic never evicts another's; past
`keep_total` rows in all, the oldest of the partition holding the most go. A response that is pruned or
deleted while later turns continue it hands its history down to them first, so a chain never loses its start.
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

Items = list[dict[str, Any]]


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    input_items: Items  # the whole input that produced `response`, history first
    # When the request continued a stored response: its id, and where this request's own items start in
    # `input_items` (what came before is that response's history, stored already).
    previous_id: str | None = None
    own_from: int = 0

    @property
    def output_items(self) -> Items:
        output = self.response.get("output")
        return list(output) if isinstance(output, list) else []


class ResponseStore:
    def __init__(self, path: Path, keep: int, keep_total: int | None = None) -> None:
        private_file(path)  # stored responses hold prompts and answers: 0600 in a 0700 directory
        self.keep = keep
        self.keep_total = keep_total if keep_total is not None else keep * 10
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._conn.execute("pragma journal_mode=wal")
        # No fsync per commit (WAL keeps every commit across a crash of daari; a power cut may lose the last
        # few): a put went from ~11 ms to under 1 ms on this machine, and it stands before a response's last bytes.
        self._conn.execute("pragma synchronous=normal")
        self._conn.execute("create table if not exists responses (id text primary key, created_at real, "
                           "response text, input text, owner text not null default '', previous_id text)")
        columns = {row[1] for row in self._conn.execute("pragma table_info(responses)")}
        if "owner" not in columns:  # a store written before responses were partitioned: its rows are shared
            self._conn.execute("alter table responses add column owner text not null default ''")
        if "previous_id" not in columns:  # written before chains were stored by reference: every row is whole
            self._conn.execute("alter table responses add column previous_id text")
        self._conn.execute("drop index if exists responses_by_age")
        self._conn.execute("create index if not exists responses_by_owner_age on responses (owner, created_at)")
        self._conn.execute("create index if not exists responses_by_previous on responses (previous_id)")
        # Rows per partition, kept in the same transactions as the rows: pruning decides without counting them.
        if "response_counts" not in {r[0] for r in self._conn.execute("select name from sqlite_master")}:
            with self._transaction():
                self._conn.execute("create table response_counts (owner text primary key, rows integer not null)")
                self._conn.execute("insert into response_counts select owner, count(*) from responses "
                                   "group by owner")

    def get(self, response_id: str, partition: str) -> StoredResponse | None:
        """The response and its whole input; None when unknown, of another partition, or (never written so)
        when its chain cannot be followed back to a whole input."""
        rows = self._conn.execute(
            "with recursive chain(id, previous_id, response, input, depth) as ("
            " select id, previous_id, response, input, 0 from responses where id = ? and owner = ?"
            " union all"
            " select r.id, r.previous_id, r.response, r.input, c.depth + 1 from responses r"
            " join chain c on r.id = c.previous_id and r.owner = ?)"
            " select previous_id, response, input from chain order by depth desc",
            (response_id, partition, partition)).fetchall()
        if not rows or rows[0][0] is not None:
            return None
        items: Items = []
        for _, response, own in rows[:-1]:  # the earlier turns: each one's input, then its answer
            items.extend(json.loads(own))
            items.extend(StoredResponse(json.loads(response), []).output_items)
        items.extend(json.loads(rows[-1][2]))
        return StoredResponse(json.loads(rows[-1][1]), items)

    def put(self, response_id: str, stored: StoredResponse, partition: str) -> None:
        with self._transaction():
            previous = stored.previous_id
            if previous is not None and not self._exists(previous, partition):
                previous = None  # pruned or deleted since the request read it: this row keeps its whole input
            own = stored.input_items[stored.own_from:] if previous is not None else stored.input_items
            if not self._exists(response_id, partition):
                self._count(partition, 1)
            self._conn.execute(
                "insert or replace into responses (id, created_at, response, input, owner, previous_id) "
                "values (?, ?, ?, ?, ?, ?)",
                (response_id, time.time(), _json(stored.response), _json(own), partition, previous))
            self._prune(partition)

    def delete(self, response_id: str, partition: str) -> bool:
        with self._transaction():
            return self._remove(response_id, partition)

    def close(self) -> None:
        self._conn.close()

    def _transaction(self) -> sqlite3.Connection:
        self._conn.execute("begin immediate")
        return self._conn  # commits when the block ends, rolls back when it raises

    def _exists(self, response_id: str, partition: str) -> bool:
        return self._conn.execute("select 1 from responses where id = ? and owner = ?",
                                  (response_id, partition)).fetchone() is not None

    def _count(self, partition: str, change: int) -> None:
        self._conn.execute("insert into response_counts values (?, ?) on conflict (owner) do update "
                           "set rows = rows + excluded.rows", (partition, change))

    def _prune(self, partition: str) -> None:
        """The oldest rows past `keep` in `partition`, then past `keep_total` in the largest partition."""
        count = self._conn.execute("select rows from response_counts where owner = ?", (partition,)).fetchone()
        for _ in range((count[0] if count else 0) - self.keep):
            self._remove_oldest(partition)
        total = self._conn.execute("select coalesce(sum(rows), 0) from response_counts").fetchone()[0]
        for _ in range(total - self.keep_total):
            largest = self._conn.execute("select owner from response_counts order by rows desc limit 1").fetchone()
            self._remove_oldest(largest[0])

    def _remove_oldest(self, partition: str) -> None:
        oldest = self._conn.execute("select id from responses where owner = ? order by created_at limit 1",
                                    (partition,)).fetchone()
        if oldest is not None:
            self._remove(oldest[0], partition)

    def _remove(self, response_id: str, partition: str) -> bool:
        """Delete a row; the turns that continue it get its history first (their input, whole, from then on)."""
        continuing = self._conn.execute("select id, input from responses where previous_id = ? and owner = ?",
                                        (response_id, partition)).fetchall()
        if continuing:
            stored = self.get(response_id, partition)
            history = [*stored.input_items, *stored.output_items] if stored is not None else []
            for child_id, own in continuing:
                self._conn.execute("update responses set input = ?, previous_id = null where id = ? and owner = ?",
                                   (_json([*history, *json.loads(own)]), child_id, partition))
        cursor = self._conn.execute("delete from responses where id = ? and owner = ?", (response_id, partition))
        if cursor.rowcount > 0:
            self._count(partition, -1)
        return cursor.rowcount > 0


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class ResponseArchive:
    """The async face of a `ResponseStore`: each call runs in a worker thread, one at a time. `partition` is
    the caller's credential partition (daari/cache/partition.py)."""

    def __init__(self, path: Path, keep: int, keep_total: int | None = None) -> None:
        self._path = path
        self._keep = keep
        self._keep_total = keep_total
        self._store: ResponseStore | None = None
        self._limiter = trio.CapacityLimiter(1)

    def _open(self) -> ResponseStore:
        if self._store is None:
            self._store = ResponseStore(self._path, self._keep, self._keep_total)
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

    async def aclose(self) -> None:
        """At shutdown: once no thread uses it, the connection closes (SQLite checkpoints and removes the WAL).
        Shielded: it runs while daari is being cancelled."""
        with trio.CancelScope(shield=True):
            async with self._limiter:
                self.close()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
