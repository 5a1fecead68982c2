"""The L0 store on disk: one SQLite table through sqlite-utils, WAL mode. Blocking: call from a thread.

An entry is a protocol-neutral `Completion` as JSON plus what the routing layer must know about it:
whether it came from an agent turn, whether it holds tool calls (never served by a semantic tier), the
tier that answered and its confidence.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from daari.datadir import private_file
from daari.protocol.chat import Completion


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


class L0Store:
    TABLE = "l0"

    def __init__(self, path: Path) -> None:
        private_file(path)  # prompts and answers: 0600 in a 0700 directory
        # One limiter of 1 owns this connection, so any single worker thread may use it.
        self._conn = sqlite3.connect(str(path), check_same_thread=False)
        self.db = sqlite_utils.Database(self._conn)
        self.db.enable_wal()
        if self.TABLE not in self.db.table_names():
            self.db[self.TABLE].create(
                {"key": str, "completion": str, "tier": str, "agent_turn": int, "semantic_ok": int,
                 "confidence": float, "created_at": float, "hits": int, "task_type": str, "rule_id": str,
                 "ceiling": str},
                pk="key",
            )

    def get(self, key: str) -> L0Entry | None:
        rows = list(self.db.query(f"select * from {self.TABLE} where key = ?", [key]))
        if not rows:
            return None
        row = rows[0]
        self.db.execute(f"update {self.TABLE} set hits = hits + 1 where key = ?", [key])
        self._conn.commit()
        return L0Entry(
            completion=Completion.from_json(json.loads(row["completion"])),
            tier=row["tier"],
            agent_turn=bool(row["agent_turn"]),
            semantic_ok=bool(row["semantic_ok"]),
            confidence=row["confidence"],
            created_at=row["created_at"],
            task_type=row.get("task_type"),
            rule_id=row.get("rule_id"),
            ceiling=row.get("ceiling"),
        )

    def put(self, key: str, entry: L0Entry) -> None:
        self.db[self.TABLE].upsert(
            {
                "key": key,
                "completion": json.dumps(entry.completion.to_json(), ensure_ascii=False),
                "tier": entry.tier,
                "agent_turn": int(entry.agent_turn),
                "semantic_ok": int(entry.semantic_ok),
                "confidence": entry.confidence,
                "created_at": entry.created_at or time.time(),
                "hits": 0,
                "task_type": entry.task_type,
                "rule_id": entry.rule_id,
                "ceiling": entry.ceiling,
            },
            pk="key",
            alter=True,  # a store written by an older daari gains the new columns
        )

    def count(self) -> int:
        return self.db[self.TABLE].count

    def close(self) -> None:
        self._conn.close()
