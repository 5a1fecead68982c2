"""Spend so far, by period (UTC day and month), project, client and session: totals in memory, one row per
(day, project, client, session, tier, purpose) in <data_dir>/spend.sqlite so they survive restarts.

Its own file rather than the decision log: the log can be turned off, drops rows when it falls behind, prunes
by age (`log.retention_days` may be under a month) and has no project. Only attempts that cost something are
written, one upsert each, on a worker thread as each ends. The `requests` column counts those paid calls (a request
that escalated from one priced tier to another is one at each); it keeps its first name so older files still open.
The `purpose` column says what the call was for (`PURPOSES`); a file from before it had none: opening it for
writing rebuilds the table with every old row as an `answer` (all it counted then), and readers of an older file
read them as such (budget/report.py).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from daari.budget.caps import Cap, periods
from daari.datadir import private_file

SPEND_FILE = "spend.sqlite"
# answer: an attempt of the execute step (served or not); the side calls: the judge's self-check, the Phase B
# classifier question, the L1 model verifier's question, a shadow call (cache verification or tier eval).
PURPOSES = ("answer", "self_check", "classifier", "verify", "shadow", "compact")
SIDE_CLIENT = "daari"  # the client a side call with no request behind it is counted to (the L1 verifier's)
SpendRow = tuple[str, str, str, str, str, float, int, str]  # day, project, client, session, tier, usd, calls, purpose
_COLUMNS = ("day TEXT, project TEXT, client TEXT, session TEXT, tier TEXT, usd REAL, requests INTEGER, "
            "purpose TEXT NOT NULL DEFAULT 'answer', PRIMARY KEY (day, project, client, session, tier, purpose)")


@dataclass(frozen=True, slots=True)
class Spend:
    """One paid call's cost (an attempt at a priced tier, served or not) and whose it was."""

    time: float
    project: str
    client: str
    session: str
    tier: str
    usd: float
    purpose: str = "answer"  # one of PURPOSES


class SpendStore:
    """The rows on disk. Blocking: used from one worker thread at a time (the ledger's limiter)."""

    def __init__(self, path: Path) -> None:
        private_file(path)
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        with self.conn:
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS spend ({_COLUMNS})")
            if "purpose" not in table_columns(self.conn):
                _add_purpose(self.conn)

    def add(self, spend: Spend) -> None:
        day = periods(spend.time)["day"]
        with self.conn:
            self.conn.execute(
                "INSERT INTO spend VALUES (?, ?, ?, ?, ?, ?, 1, ?) "
                "ON CONFLICT (day, project, client, session, tier, purpose) "
                "DO UPDATE SET usd = usd + excluded.usd, requests = requests + 1",
                (day, spend.project, spend.client, spend.session, spend.tier, spend.usd, spend.purpose))

    def rows(self, since_day: str) -> list[SpendRow]:
        return list(self.conn.execute(
            "SELECT day, project, client, session, tier, usd, requests, purpose FROM spend WHERE day >= ? "
            "ORDER BY day", (since_day,)))

    def close(self) -> None:
        self.conn.close()


def table_columns(conn: sqlite3.Connection) -> set[str]:
    return {row[1] for row in conn.execute("PRAGMA table_info(spend)")}


def _add_purpose(conn: sqlite3.Connection) -> None:
    """A file from before `purpose`: its key has no room for it, so the table is rebuilt (in the caller's
    transaction), every old row an answer's."""
    conn.execute("DROP TABLE IF EXISTS spend_new")  # left by a rebuild cut short
    conn.execute(f"CREATE TABLE spend_new ({_COLUMNS})")
    conn.execute("INSERT INTO spend_new SELECT day, project, client, session, tier, usd, requests, 'answer' "
                 "FROM spend")
    conn.execute("DROP TABLE spend")
    conn.execute("ALTER TABLE spend_new RENAME TO spend")


class Ledger:
    """Totals by (period key, scope, key): ("2026-12-01", "project", "/home/me/app") -> USD."""

    def __init__(self) -> None:
        self.totals: defaultdict[tuple[str, str, str], float] = defaultdict(float)

    def add(self, spend: Spend) -> None:
        self.count(spend.time, spend.project, spend.client, spend.usd)

    def count(self, when: float, project: str, client: str, usd: float) -> None:
        for key in periods(when).values():
            self.totals[(key, "all", "")] += usd
            self.totals[(key, "project", project)] += usd
            self.totals[(key, "client", client)] += usd

    def load(self, rows: list[SpendRow]) -> None:
        """Rows of the store (this month's): the totals as they were when daari stopped. Every purpose counts."""
        for day, project, client, _session, _tier, usd, _requests, _purpose in rows:
            for key in (day, day[:7]):
                self.totals[(key, "all", "")] += usd
                self.totals[(key, "project", project)] += usd
                self.totals[(key, "client", client)] += usd

    def spent(self, cap: Cap, now: float, project: str, client: str) -> float:
        key = periods(now)[cap.period]
        scope_key = {"all": "", "project": project, "client": client}[cap.scope]
        return self.totals.get((key, cap.scope, scope_key), 0.0)

    def by_scope(self, now: float) -> dict[str, dict[str, dict[str, float]]]:
        """{"day": {"all": {"": usd}, "project": {...}, "client": {...}}, "month": {...}} for now's periods."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for period, key in periods(now).items():
            scopes: dict[str, dict[str, float]] = {"all": {}, "project": {}, "client": {}}
            for (k, scope, name), usd in self.totals.items():
                if k == key:
                    scopes[scope][name] = round(usd, 6)
            out[period] = scopes
        return out
