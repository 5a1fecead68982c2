"""Spend so far, by period (UTC day and month), project, client and session: totals in memory, one row per
(day, project, client, session, tier) in <data_dir>/spend.sqlite so they survive restarts.

Its own file rather than the decision log: the log can be turned off, drops rows when it falls behind, prunes
by age (`log.retention_days` may be under a month) and has no project. Only attempts that cost something are
written, one upsert each, on a worker thread as each ends. The `requests` column counts those paid calls (a request
that escalated from one priced tier to another is one at each); it keeps its first name so older files still open.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from daari.budget.caps import Cap, periods
from daari.datadir import private_file

SPEND_FILE = "spend.sqlite"


@dataclass(frozen=True, slots=True)
class Spend:
    """One paid call's cost (an attempt at a priced tier, served or not) and whose it was."""

    time: float
    project: str
    client: str
    session: str
    tier: str
    usd: float


class SpendStore:
    """The rows on disk. Blocking: used from one worker thread at a time (the ledger's limiter)."""

    def __init__(self, path: Path) -> None:
        private_file(path)
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS spend (day TEXT, project TEXT, client TEXT, session TEXT, tier TEXT, "
            "usd REAL, requests INTEGER, PRIMARY KEY (day, project, client, session, tier))")

    def add(self, spend: Spend) -> None:
        day = periods(spend.time)["day"]
        with self.conn:
            self.conn.execute(
                "INSERT INTO spend VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (day, project, client, session, tier) "
                "DO UPDATE SET usd = usd + excluded.usd, requests = requests + 1",
                (day, spend.project, spend.client, spend.session, spend.tier, spend.usd))

    def rows(self, since_day: str) -> list[tuple[str, str, str, str, str, float, int]]:
        return list(self.conn.execute(
            "SELECT day, project, client, session, tier, usd, requests FROM spend WHERE day >= ? ORDER BY day",
            (since_day,)))

    def close(self) -> None:
        self.conn.close()


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

    def load(self, rows: list[tuple[str, str, str, str, str, float, int]]) -> None:
        """Rows of the store (this month's): the totals as they were when daari stopped."""
        for day, project, client, _session, _tier, usd, _requests in rows:
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
