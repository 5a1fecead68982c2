"""The L0 store on disk: one SQLite table (schema through sqlite-utils), WAL mode. Blocking: call from a thread.

An entry is a protocol-neutral `Completion` as JSON plus what the routing layer must know about it:
whether it came from an agent turn, whether it holds tool calls (never served by a semantic tier), the
tier that answered and its confidence. The store is bounded: entries older than `ttl_s` are not served
and are swept; past `max_bytes` of entries, the least recently used go. Writes (puts and the hit tally)
come in batches, one transaction each; a read never writes, and reads may use a connection of their own
(`L0Reader`), so they never wait behind a write.

Each row carries a checksum of its key and completion, checked on every read: a row damaged on disk (a torn
write after a crash, a corrupted page, an edit) is a miss, never a broken or truncated answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from daari.datadir import private_file
from daari.protocol.chat import Completion

log = logging.getLogger("daari.cache")


@dataclass
class L0Entry:
    completion: Completion
    tier: str
    agent_turn: bool = False
    semantic_ok: bool = True  # False: only an exact L0 hit may serve this (tool calls, agent turns)
    confidence: float | None = None
    created_at: float = 0.0
    # The routing classification when stored: a hit reports it without classifying again.
    task_type: str | None = None
    rule_id: str | None = None
    ceiling: str | None = None
    size: int = 0  # bytes it takes (its completion's JSON), computed once by `entry_size`


# A row's bookkeeping beyond its completion JSON (key, columns, index entries), for the size budget.
ROW_OVERHEAD = 200


def entry_size(entry: L0Entry) -> int:
    """Bytes `entry` takes in memory and on disk, as counted against the cache's budgets."""
    if not entry.size:
        entry.size = len(completion_json(entry.completion).encode()) + ROW_OVERHEAD
    return entry.size


def completion_json(completion: Completion) -> str:
    return json.dumps(completion.to_json(), ensure_ascii=False)


def row_checksum(key: str, completion: str) -> str:
    """What a row's `checksum` column holds: a hash of its key and its completion's JSON as stored."""
    return hashlib.blake2b(f"{key}\0{completion}".encode(), digest_size=16).hexdigest()


class L0Store:
    TABLE = "l0"
    COLUMNS = ("key", "completion", "tier", "agent_turn", "semantic_ok", "confidence", "created_at", "hits",
               "task_type", "rule_id", "ceiling", "size", "last_used", "checksum")

    def __init__(self, path: Path, max_bytes: int = 0, ttl_s: float = 0.0) -> None:
        """`max_bytes` 0: no size bound; `ttl_s` 0: entries never expire."""
        self.path = path
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        private_file(path)  # prompts and answers: 0600 in a 0700 directory
        # One limiter of 1 owns this connection, so any single worker thread may use it.
        self._conn = sqlite3.connect(str(path), check_same_thread=False)
        self.db = sqlite_utils.Database(self._conn)
        if self.TABLE not in self.db.table_names():
            # Before any table exists: lets evictions hand pages back with incremental_vacuum.
            self._conn.execute("pragma auto_vacuum = incremental")
        self.db.enable_wal()
        table = self.db[self.TABLE]
        if self.TABLE not in self.db.table_names():
            table.create(  # type: ignore[union-attr]
                {"key": str, "completion": str, "tier": str, "agent_turn": int, "semantic_ok": int,
                 "confidence": float, "created_at": float, "hits": int, "task_type": str, "rule_id": str,
                 "ceiling": str, "size": int, "last_used": float, "checksum": str},
                pk="key",
            )
        self._migrate()
        self.total_bytes = int(self._conn.execute(f"select coalesce(sum(size), 0) from {self.TABLE}").fetchone()[0])

    def _migrate(self) -> None:
        """A store written by an older daari gains the new columns, filled in."""
        table = self.db.table(self.TABLE)
        columns = table.columns_dict
        for name, kind in (("task_type", str), ("rule_id", str), ("ceiling", str), ("size", int),
                           ("last_used", float), ("hits", int), ("checksum", str)):
            if name not in columns:
                table.add_column(name, kind)
        with self._conn:
            self._conn.execute(f"update {self.TABLE} set size = length(completion) + {ROW_OVERHEAD} "
                               "where size is null")
            self._conn.execute(f"update {self.TABLE} set last_used = created_at where last_used is null")
            self._conn.execute(f"create index if not exists l0_last_used on {self.TABLE}(last_used)")
            # rows written before checksums: summed as they are now (what is on disk is what a read checks)
            self._conn.create_function("l0_row_checksum", 2, row_checksum, deterministic=True)
            self._conn.execute(f"update {self.TABLE} set checksum = l0_row_checksum(key, completion) "
                               "where checksum is null")

    def get(self, key: str, now: float | None = None) -> L0Entry | None:
        """The entry, or None (absent or expired). Never writes: hits are tallied by the caller."""
        return _read_entry(self._conn, key, self.ttl_s, now)

    def reader(self) -> L0Reader:
        """A second connection for reads only: under WAL it reads while this one writes (another thread)."""
        return L0Reader(self.path, self.ttl_s)

    def put(self, key: str, entry: L0Entry) -> None:
        self.write([(key, entry)], {})

    def write(self, puts: Iterable[tuple[str, L0Entry]], hits: Mapping[str, int], now: float | None = None) -> None:
        """One transaction: the puts, the hit tally since the last batch, then evictions past the bounds."""
        now = now if now is not None else time.time()
        rows = []
        for key, entry in puts:
            entry_size(entry)
            completion = completion_json(entry.completion)
            rows.append((key, completion, entry.tier, int(entry.agent_turn),
                         int(entry.semantic_ok), entry.confidence, entry.created_at or now, 0, entry.task_type,
                         entry.rule_id, entry.ceiling, entry.size, now, row_checksum(key, completion)))
        total = self.total_bytes  # applied only once the transaction commits: a failed one changes nothing
        with self._conn:
            for row in rows:
                old = self._conn.execute(f"select size from {self.TABLE} where key = ?", (row[0],)).fetchone()
                self._conn.execute(
                    f"insert or replace into {self.TABLE} ({', '.join(self.COLUMNS)}) "
                    f"values ({', '.join('?' * len(self.COLUMNS))})", row)
                total += row[11] - (old[0] or 0 if old else 0)
            if hits:
                self._conn.executemany(
                    f"update {self.TABLE} set hits = hits + ?, last_used = ? where key = ?",
                    [(count, now, key) for key, count in hits.items()])
            evicted, total = self._evict(now, total)
        self.total_bytes = total
        if evicted:
            self._conn.execute("pragma incremental_vacuum")

    def sweep(self, now: float | None = None) -> int:
        """Delete expired entries and any past the size bound; the number deleted."""
        with self._conn:
            evicted, total = self._evict(now if now is not None else time.time(), self.total_bytes)
        self.total_bytes = total
        if evicted:
            self._conn.execute("pragma incremental_vacuum")
        return evicted

    def _evict(self, now: float, total: int) -> tuple[int, int]:
        """Inside a transaction: expired entries, then least recently used ones down to 90% of max_bytes.

        `total` is the entries' bytes before; returns (entries deleted, bytes after)."""
        evicted = 0
        if self.ttl_s:
            cutoff = now - self.ttl_s
            freed = self._conn.execute(f"select coalesce(sum(size), 0), count(*) from {self.TABLE} "
                                       "where created_at < ?", (cutoff,)).fetchone()
            if freed[1]:
                self._conn.execute(f"delete from {self.TABLE} where created_at < ?", (cutoff,))
                total -= int(freed[0])
                evicted += int(freed[1])
        if self.max_bytes and total > self.max_bytes:
            goal = int(self.max_bytes * 0.9)  # some headroom: not one eviction per put
            while total > goal:
                oldest = self._conn.execute(f"select key, size from {self.TABLE} order by last_used "
                                            "limit 256").fetchall()
                if not oldest:
                    total = 0
                    break
                doomed: list[tuple[str]] = []
                for key, size in oldest:
                    doomed.append((key,))
                    total -= size or 0
                    if total <= goal:
                        break
                self._conn.executemany(f"delete from {self.TABLE} where key = ?", doomed)
                evicted += len(doomed)
        return evicted, total

    def count(self) -> int:
        return int(self._conn.execute(f"select count(*) from {self.TABLE}").fetchone()[0])

    def keys(self) -> list[str]:
        """Every stored key (checks and tools: a whole scan)."""
        return [row[0] for row in self._conn.execute(f"select key from {self.TABLE}")]

    def close(self) -> None:
        self._conn.close()


class L0Reader:
    """Reads of an L0Store's file on a connection of their own (one thread at a time). Under WAL, SQLite lets
    it read the last committed state while the writer's batch is in progress, so a lookup never waits on it."""

    def __init__(self, path: Path, ttl_s: float = 0.0) -> None:
        self.ttl_s = ttl_s
        self._conn = sqlite3.connect(str(path), check_same_thread=False)
        self._conn.execute("pragma query_only = true")

    def get(self, key: str, now: float | None = None) -> L0Entry | None:
        return _read_entry(self._conn, key, self.ttl_s, now)

    def count(self) -> int:
        return int(self._conn.execute(f"select count(*) from {L0Store.TABLE}").fetchone()[0])

    def close(self) -> None:
        self._conn.close()


def _read_entry(conn: sqlite3.Connection, key: str, ttl_s: float, now: float | None) -> L0Entry | None:
    row = conn.execute(
        f"select completion, tier, agent_turn, semantic_ok, confidence, created_at, task_type, rule_id, "
        f"ceiling, size, checksum from {L0Store.TABLE} where key = ?", (key,)).fetchone()
    if row is None:
        return None
    if ttl_s and (now if now is not None else time.time()) - (row[5] or 0) > ttl_s:
        return None
    completion = _verified_completion(key, row[0], row[10])
    if completion is None:
        return None
    return L0Entry(
        completion=completion, tier=row[1], agent_turn=bool(row[2]),
        semantic_ok=bool(row[3]), confidence=row[4], created_at=row[5], task_type=row[6], rule_id=row[7],
        ceiling=row[8], size=row[9] or 0,
    )


def _verified_completion(key: str, text: object, checksum: object) -> Completion | None:
    """The row's completion when its checksum holds and it parses; else None (a miss), said in the log. A later
    put of the same key replaces the damaged row."""
    if not isinstance(text, str) or checksum != row_checksum(key, text):
        log.warning("L0 entry %s.. fails its checksum (damaged on disk): served as a miss", key[:12])
        return None
    try:
        return Completion.from_json(json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError):  # summed as written by a bug, or an older daari
        log.warning("L0 entry %s.. does not parse: served as a miss", key[:12])
        return None
