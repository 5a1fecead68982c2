"""The command context store (CCS): a command's last result per repository, in SQLite, with a TTL.

Blocking; used from the ToolRunnerActor's thread only. The key is `plan.ccs_key` (SHA-256 over repo root,
cwd and the normalized command). An entry holds the output summary shown in answers, never the full log
(that stays in its file, whose path is stored).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from daari.datadir import private_file

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ccs (
    key TEXT PRIMARY KEY,
    repo_root TEXT NOT NULL,
    command TEXT NOT NULL,
    kind TEXT NOT NULL,
    exit_code INTEGER,
    summary TEXT NOT NULL,
    log_path TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
)
"""


@dataclass(frozen=True)
class CcsEntry:
    key: str
    repo_root: str
    command: str
    kind: str
    exit_code: int | None
    summary: str
    log_path: str
    duration_ms: float
    created_at: float
    expires_at: float


class CcsStore:
    def __init__(self, path: Path) -> None:
        private_file(path)  # command output can hold secrets: 0600 in a 0700 directory
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(_SCHEMA)

    def get(self, key: str, now: float) -> CcsEntry | None:
        row = self.db.execute("SELECT * FROM ccs WHERE key = ? AND expires_at > ?", (key, now)).fetchone()
        return CcsEntry(*row) if row else None

    def put(self, entry: CcsEntry) -> None:
        self.db.execute("INSERT OR REPLACE INTO ccs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (entry.key, entry.repo_root, entry.command, entry.kind, entry.exit_code, entry.summary,
                         entry.log_path, entry.duration_ms, entry.created_at, entry.expires_at))

    def invalidate(self, key: str) -> None:
        self.db.execute("DELETE FROM ccs WHERE key = ?", (key,))

    def expire(self, now: float) -> int:
        return self.db.execute("DELETE FROM ccs WHERE expires_at <= ?", (now,)).rowcount

    def close(self) -> None:
        self.db.close()
