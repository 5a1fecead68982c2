"""The decision log: one SQLite row per routing decision (sqlite-utils), pruned by age and size.

Blocking. Rows are written in batches by the decision log's writer process (decision_log_writer.py), never
in daari's own process; daari reads through `read_rows`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlite_utils

DECISIONS_FILE = "decisions.sqlite"


def decisions_path(data_dir: str) -> Path:
    """Where the decision log lives in a data dir."""
    return Path(data_dir) / DECISIONS_FILE

COLUMNS: dict[str, type] = {
    "request_id": str, "time": float, "protocol": str, "client": str, "model": str, "stream": int,
    "tier": str, "task_type": str, "rule_id": str, "cache": str, "cache_level": str,
    "similarity": float, "verdict": str, "escalated_from": str, "attempts": str, "agent_turn": int,
    "latency_ms": float, "ttft_ms": float, "input_tokens": int, "output_tokens": int,
    "cost_usd": float, "cost_l6_usd": float, "saved_usd": float, "status": int, "error": str,
    "prompt_hash": str, "prompt": str,
}


# A batch goes in as multi-row INSERTs of up to 64 rows (27 columns x 64 = 1,728 parameters, far below SQLite's
# limit): one SQLite step per statement rather than executemany's one per row (measured when the writer was a
# thread of daari's: ~60 us of a busy server's CPU per request); a JSON array unpacked by json_each costs 2.5x
# the SQLite CPU (19 vs 7.7 us a row).
ROWS_PER_STATEMENT = 64
Values = tuple[Any, ...]


@lru_cache(maxsize=8)
def _insert_sql(rows: int) -> str:
    one = f"({', '.join('?' for _ in COLUMNS)})"
    return f"INSERT OR REPLACE INTO decisions ({', '.join(COLUMNS)}) VALUES {', '.join([one] * rows)}"


def batch_values(rows: Iterable[Mapping[str, Any]]) -> list[Values]:
    """Each row's values in column order, from rows given as mappings (`insert`)."""
    return [tuple(row.get(column) for column in COLUMNS) for row in rows]


def _statements(values: list[Values]) -> Iterator[tuple[str, list[Any]]]:
    """(sql, flat parameters) covering `values` with power-of-two row counts: few distinct, cached statements."""
    done = 0
    while done < len(values):
        size = min(ROWS_PER_STATEMENT, 1 << ((len(values) - done).bit_length() - 1))
        yield _insert_sql(size), [value for row in values[done:done + size] for value in row]
        done += size


class DecisionLogStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        self.conn = sqlite3.connect(path, check_same_thread=False)
        if not existed:
            os.chmod(path, 0o600)
        self.db = sqlite_utils.Database(self.conn)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        table = self.db["decisions"]
        if not table.exists():
            table.create(COLUMNS, pk="request_id")  # type: ignore[union-attr]
            table.create_index(["time"])  # type: ignore[union-attr]

    def insert(self, rows: Iterable[Mapping[str, Any]]) -> int:
        return self.insert_values(batch_values(rows))

    def insert_values(self, values: list[Values]) -> int:
        """Write rows made by `batch_values` in one transaction; returns how many."""
        with self.conn:
            for sql, parameters in _statements(values):
                self.conn.execute(sql, parameters)
        return len(values)

    def prune(self, max_age_s: float, max_rows: int, now: float | None = None) -> int:
        """Drop rows older than `max_age_s` and the oldest past `max_rows`; returns how many went."""
        cutoff = (now if now is not None else time.time()) - max_age_s
        with self.conn:
            aged = self.conn.execute("DELETE FROM decisions WHERE time < ?", (cutoff,)).rowcount
            over = self.conn.execute(
                "DELETE FROM decisions WHERE request_id IN (SELECT request_id FROM decisions "
                "ORDER BY time DESC LIMIT -1 OFFSET ?)", (max_rows,)).rowcount
        return aged + over

    def rows_since(self, since_ts: float, limit: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM decisions WHERE time >= ? ORDER BY time"
        params: list[Any] = [since_ts]
        if limit is not None:
            sql = "SELECT * FROM (SELECT * FROM decisions WHERE time >= ? ORDER BY time DESC LIMIT ?) ORDER BY time"
            params.append(limit)
        cursor = self.conn.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM decisions").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


def read_rows(path: Path, since_ts: float) -> list[dict[str, Any]]:
    """Rows since `since_ts` through a read-only connection (WAL: readers never block the writer)."""
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cursor = conn.execute("SELECT * FROM decisions WHERE time >= ? ORDER BY time", (since_ts,))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    except sqlite3.OperationalError:  # no table yet: nothing was logged
        return []
    finally:
        conn.close()
