"""The shadow outcomes on disk (`<data_dir>/shadow.sqlite`, 0600): one row per compared sample, the skip counts
and the last diversity snapshot, so `daari report` and the page survive restarts. `ShadowStore` blocks (one
connection); `ShadowArchive` runs it on a worker thread behind a limiter of one (as daari/responses/store.py).

A row keeps both answers' keyed hashes (BLAKE2b under the data dir's secret, as the decision log's prompt
hashes) and their texts only with `log.prompts: full`; never a prompt, never a header.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio

from daari.datadir import private_file
from daari.trust.diversity import Diversity

R = TypeVar("R")
DAY_S = 86_400
SHADOW_FILE = "shadow.sqlite"


def shadow_path(data_dir: str) -> Path:
    """Where a data dir keeps its shadow outcomes."""
    return Path(data_dir) / SHADOW_FILE


@dataclass(frozen=True)
class Outcome:
    """One shadow sample compared. `kind`: "cache" (an L0/L1 hit) or "tier" (a low tier's answer)."""

    kind: str
    level: str  # the level that answered: L0, L1 (cache) or L2, L3, L4 (tier)
    asked_tier: str  # the tier the fresh answer came from
    task_type: str | None
    rule_id: str | None
    client: str
    outcome: str  # agree | disagree | undecided
    reason: str
    cached_hash: str
    fresh_hash: str
    tokens: int
    entry_id: int | None = None  # the L1 entry served
    similarity: float | None = None  # the L1 lookup's similarity of that entry
    answer_similarity: float | None = None
    demoted: bool = False
    cached_text: str | None = None  # log.prompts: full only
    fresh_text: str | None = None
    time: float = 0.0


COLUMNS = tuple(Outcome.__dataclass_fields__)


def answer_hash(text: str, secret: bytes | None) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=(secret or b"daari")[:64],
                           digest_size=8).hexdigest()


class ShadowStore:
    def __init__(self, path: Path) -> None:
        private_file(path)  # answers' hashes, and with log.prompts: full the answers
        self._conn = sqlite3.connect(str(path), check_same_thread=False)
        self._conn.execute("pragma journal_mode=wal")
        self._conn.execute(
            "create table if not exists outcomes (id integer primary key autoincrement, day integer not null, "
            "kind text not null, level text not null, asked_tier text not null, task_type text, rule_id text, "
            "client text not null, outcome text not null, reason text not null, cached_hash text not null, "
            "fresh_hash text not null, tokens integer not null, entry_id integer, similarity real, "
            "answer_similarity real, demoted integer not null default 0, cached_text text, fresh_text text, "
            "time real not null)")
        self._conn.execute("create index if not exists outcomes_time on outcomes (time)")
        self._conn.execute("create table if not exists skips (reason text primary key, count integer not null)")
        self._conn.execute("create table if not exists spent (day integer primary key, tokens integer not null)")
        self._conn.execute("create table if not exists diversity (task_type text primary key, hits integer, "
                           "questions integer, answers integer, top_answer_share real, updated_at real)")
        self._conn.commit()

    def add(self, outcome: Outcome) -> None:
        row = asdict(outcome)
        row["time"] = row["time"] or time.time()
        row["day"] = int(row["time"] // DAY_S)
        row["demoted"] = int(row["demoted"])
        names = ", ".join(row)
        self._conn.execute(f"insert into outcomes ({names}) values ({', '.join('?' * len(row))})", list(row.values()))
        self._conn.commit()

    def add_skips(self, counts: dict[str, int]) -> None:
        self._conn.executemany("insert into skips (reason, count) values (?, ?) on conflict(reason) do update "
                               "set count = count + excluded.count", list(counts.items()))
        self._conn.commit()

    def save_diversity(self, rows: Sequence[Diversity]) -> None:
        now = time.time()
        self._conn.executemany("insert or replace into diversity values (?, ?, ?, ?, ?, ?)",
                               [(d.task_type, d.hits, d.questions, d.answers, d.top_answer_share, now)
                                for d in rows])
        self._conn.commit()

    def prune(self, before: float) -> int:
        """Drop outcomes older than `before` (log.retention_days, as the decision log); the spending and skip
        counts are small and stay."""
        cursor = self._conn.execute("delete from outcomes where time < ?", [before])
        self._conn.commit()
        return cursor.rowcount

    def rows(self, since: float = 0.0) -> list[dict[str, Any]]:
        cursor = self._conn.execute(f"select {', '.join(COLUMNS)} from outcomes where time >= ? order by id",
                                    [since])
        return [dict(zip(COLUMNS, row, strict=True)) for row in cursor]

    def l1_samples(self, limit: int = 20_000) -> list[tuple[str, float, bool]]:
        """(task type, similarity, disagreed) of the latest decided L1 samples: what the bars are fit on."""
        cursor = self._conn.execute(
            "select task_type, similarity, outcome from outcomes where kind = 'cache' and level = 'L1' and "
            "similarity is not null and outcome in ('agree', 'disagree') order by id desc limit ?", [limit])
        return [(task or "unknown", float(sim), outcome == "disagree") for task, sim, outcome in cursor]

    def add_spent(self, day: int, tokens: int) -> None:
        """Every shadow call's tokens, compared or not (a call cut short may still have cost its prompt)."""
        self._conn.execute("insert into spent (day, tokens) values (?, ?) on conflict(day) do update "
                           "set tokens = tokens + excluded.tokens", [day, tokens])
        self._conn.commit()

    def spent_on(self, day: int) -> int:
        row = self._conn.execute("select tokens from spent where day = ?", [day]).fetchone()
        return int(row[0]) if row else 0

    def skips(self) -> dict[str, int]:
        return {reason: int(count) for reason, count in self._conn.execute("select reason, count from skips")}

    def diversity(self) -> list[dict[str, Any]]:
        cursor = self._conn.execute("select task_type, hits, questions, answers, top_answer_share, updated_at "
                                    "from diversity order by task_type")
        return [{**Diversity(task, hits, questions, answers, share).to_json(), "updated_at": updated}
                for task, hits, questions, answers, share, updated in cursor]

    def close(self) -> None:
        self._conn.close()


class ShadowArchive:
    """The async face of a `ShadowStore`: each call on a worker thread, one at a time; opened on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._store: ShadowStore | None = None
        self._limiter = trio.CapacityLimiter(1)

    def _open(self) -> ShadowStore:
        if self._store is None:
            self._store = ShadowStore(self.path)
        return self._store

    async def run(self, work: Callable[[ShadowStore], R]) -> R:
        return await trio.to_thread.run_sync(lambda: work(self._open()), limiter=self._limiter)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def read_shadow(path: Path, since: float) -> tuple[list[dict[str, Any]], dict[str, int], list[dict[str, Any]]]:
    """For `daari report` (no server): the outcomes since `since`, the skip counts and the diversity snapshot."""
    if not path.exists():
        return [], {}, []
    store = ShadowStore(path)
    try:
        return store.rows(since), store.skips(), store.diversity()
    finally:
        store.close()
