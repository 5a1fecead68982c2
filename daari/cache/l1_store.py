"""The L1 store on disk: one SQLite table of entries with their embedding vectors. Blocking: call from a thread.

An entry is the prompt's embedded text (the verifier compares it with a new prompt), its lookup context,
its vector (384 float32), and the answer as a protocol-neutral `Completion`. Bounded by count and age.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from daari.datadir import private_file
from daari.protocol.chat import Completion
from daari.semantic.minilm import DIMENSIONS


def context_id(context: str) -> int:
    """The index's integer for a lookup context (60 bits of its hash); the store keeps the whole string."""
    return int(context[:15], 16)


@dataclass(frozen=True)
class L1Entry:
    id: int
    context: str
    embed_text: str
    completion: Completion
    tier: str
    created_at: float
    task_type: str | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class StoredVectors:
    row_ids: npt.NDArray[np.int64]
    contexts: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]


class L1Store:
    TABLE = "l1"

    def __init__(self, path: Path) -> None:
        private_file(path)  # prompts and answers: 0600 in a 0700 directory
        # One limiter of 1 owns this connection, so any single worker thread may use it.
        self._conn = sqlite3.connect(str(path), check_same_thread=False)
        self._conn.execute("pragma journal_mode=wal")
        self._conn.execute(
            f"create table if not exists {self.TABLE} (id integer primary key autoincrement, context text not null,"
            " context_id integer not null, embed_text text not null, vector blob not null, completion text not null,"
            " tier text not null, task_type text, confidence real, created_at real not null, hits integer default 0)")
        self._conn.execute(f"create index if not exists {self.TABLE}_created on {self.TABLE}(created_at)")
        columns = {row[1] for row in self._conn.execute(f"pragma table_info({self.TABLE})")}
        if "demoted" not in columns:  # a store from before shadow sampling: nothing was demoted
            self._conn.execute(f"alter table {self.TABLE} add column demoted integer not null default 0")
        self._conn.commit()

    def put(self, context: str, embed_text: str, vector: npt.NDArray[np.float32], completion: Completion, tier: str,
            task_type: str | None = None, confidence: float | None = None) -> int:
        cursor = self._conn.execute(
            f"insert into {self.TABLE} (context, context_id, embed_text, vector, completion, tier, task_type,"
            " confidence, created_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [context, context_id(context), embed_text, np.asarray(vector, np.float32).tobytes(),
             json.dumps(completion.to_json(), ensure_ascii=False), tier, task_type, confidence, time.time()])
        self._conn.commit()
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def get(self, row_id: int) -> L1Entry | None:
        row = self._conn.execute(
            f"select id, context, embed_text, completion, tier, created_at, task_type, confidence from {self.TABLE}"
            " where id = ? and demoted = 0", [row_id]).fetchone()
        if row is None:
            return None
        return L1Entry(row[0], row[1], row[2], Completion.from_json(json.loads(row[3])), row[4], row[5], row[6],
                       row[7])

    def hit(self, row_id: int) -> None:
        self._conn.execute(f"update {self.TABLE} set hits = hits + 1 where id = ?", [row_id])
        self._conn.commit()

    def demote(self, row_id: int) -> bool:
        """A shadow sample found the entry's answer wrong: it is never served again (kept, for the record)."""
        cursor = self._conn.execute(f"update {self.TABLE} set demoted = 1 where id = ? and demoted = 0", [row_id])
        self._conn.commit()
        return cursor.rowcount > 0

    def demoted(self) -> int:
        return int(self._conn.execute(f"select count(*) from {self.TABLE} where demoted = 1").fetchone()[0])

    def vectors(self) -> StoredVectors:
        """Every servable entry's vector, oldest first: what the index is rebuilt from at start."""
        rows = self._conn.execute(f"select id, context_id, vector from {self.TABLE} where demoted = 0 "
                                  "order by id").fetchall()
        vectors = np.frombuffer(b"".join(r[2] for r in rows), np.float32).reshape(len(rows), DIMENSIONS)
        return StoredVectors(np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64),
                             vectors.copy())

    def evict(self, max_entries: int, max_age_s: float, now: float | None = None) -> list[int]:
        """Delete entries older than `max_age_s` and the oldest past `max_entries`; their ids."""
        cutoff = (now if now is not None else time.time()) - max_age_s
        old = [r[0] for r in self._conn.execute(f"select id from {self.TABLE} where created_at < ?", [cutoff])]
        over = self.count() - len(old) - max_entries
        if over > 0:
            old += [r[0] for r in self._conn.execute(
                f"select id from {self.TABLE} where created_at >= ? order by id limit ?", [cutoff, over])]
        if old:
            self._conn.executemany(f"delete from {self.TABLE} where id = ?", [[i] for i in old])
            self._conn.commit()
        return old

    def count(self) -> int:
        return int(self._conn.execute(f"select count(*) from {self.TABLE}").fetchone()[0])

    def close(self) -> None:
        self._conn.close()
