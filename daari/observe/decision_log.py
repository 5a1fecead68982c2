"""The decision log: one SQLite row per routing decision (sqlite-utils), pruned by age and size.

Blocking. Rows are written in batches by the decision log's writer process (decision_log_writer.py), never
in daari's own process; daari reads through `read_rows`.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlite_utils

from daari.datadir import private_file

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
    "prompt_hash": str, "prompt": str, "session": str, "call_type": str, "cache_read_tokens": int,
    "cache_write_tokens": int, "affinity": str, "lost_cache_usd": float,
    # docs/budget.md and docs/privacy.md: the request's project, secrets redacted (or seen, privacy.redact: report)
    # and tool results withheld (privacy.never_send) on its way to a remote tier.
    "project": str, "secrets_redacted": int, "results_withheld": int,
    # What L1 reported when it did not serve (daari_meta.l1): "miss", "rejected", or why it did not look.
    "l1": str,
}


# A batch goes in as multi-row INSERTs of up to 64 rows (37 columns x 64 = 2,368 parameters, far below SQLite's
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
        private_file(path)  # created 0600 in a 0700 directory before SQLite opens it (its -wal and -shm follow)
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.db = sqlite_utils.Database(self.conn)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        table = self.db["decisions"]
        if not table.exists():
            table.create(COLUMNS, pk="request_id")  # type: ignore[union-attr]
            table.create_index(["time"])  # type: ignore[union-attr]
        else:  # a log written by an older daari: the columns added since, empty for its rows
            present = {column.name for column in table.columns}
            for name, kind in COLUMNS.items():
                if name not in present:
                    table.add_column(name, kind)  # type: ignore[union-attr]

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


def read_only_uri(path: Path) -> str:
    """A `file:` URI opening `path` read-only; `?`, `#` and `%` in the path are percent-encoded (SQLite would read
    them as the start of the query, the fragment, or an escape)."""
    return f"file:{quote(str(path.absolute()))}?mode=ro"


def read_rows(path: Path, since_ts: float) -> list[dict[str, Any]]:
    """Rows since `since_ts` through a read-only connection (WAL: readers never block the writer)."""
    if not path.exists():
        return []
    conn = sqlite3.connect(read_only_uri(path), uri=True)
    try:
        cursor = conn.execute("SELECT * FROM decisions WHERE time >= ? ORDER BY time", (since_ts,))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    except sqlite3.OperationalError:  # no table yet: nothing was logged
        return []
    finally:
        conn.close()
