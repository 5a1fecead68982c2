"""Command logs are bounded by count, total size and age: oldest first, never a log still being written."""

from __future__ import annotations

import os
import time
from pathlib import Path

from daari.tools.logs import LogBounds, prune_logs
from tests.test_tool_runner import plan, run_to_end, runner, script

DAY = 86_400.0


def make_log(logs: Path, name: str, size: int, age_s: float, now: float) -> Path:
    path = logs / f"{name}.log"
    path.write_bytes(b"x" * size)
    os.utime(path, (now - age_s, now - age_s))
    return path


def names(logs: Path) -> list[str]:
    return sorted(p.stem for p in logs.glob("*.log"))


def test_the_oldest_logs_go_past_the_count(tmp_path: Path) -> None:
    now = time.time()
    for i in range(6):
        make_log(tmp_path, f"l{i}", 10, age_s=60 * (6 - i), now=now)  # l5 newest
    gone = prune_logs(tmp_path, LogBounds(max_files=3, max_total_bytes=10**9, max_age_s=30 * DAY), now)
    assert names(tmp_path) == ["l3", "l4", "l5"] and len(gone) == 3


def test_the_oldest_logs_go_past_the_total_size(tmp_path: Path) -> None:
    now = time.time()
    for i in range(5):
        make_log(tmp_path, f"l{i}", 100, age_s=60 * (5 - i), now=now)
    prune_logs(tmp_path, LogBounds(max_files=100, max_total_bytes=250, max_age_s=30 * DAY), now)
    assert names(tmp_path) == ["l3", "l4"]


def test_logs_older_than_the_age_go_and_other_files_stay(tmp_path: Path) -> None:
    now = time.time()
    make_log(tmp_path, "old", 10, age_s=8 * DAY, now=now)
    make_log(tmp_path, "recent", 10, age_s=1 * DAY, now=now)
    (tmp_path / "notes.txt").write_text("not a log")
    prune_logs(tmp_path, LogBounds(max_files=100, max_total_bytes=10**9, max_age_s=7 * DAY), now)
    assert names(tmp_path) == ["recent"] and (tmp_path / "notes.txt").exists()


def test_a_log_being_written_is_never_deleted(tmp_path: Path) -> None:
    now = time.time()
    running = make_log(tmp_path, "running", 1000, age_s=9 * DAY, now=now)
    make_log(tmp_path, "done", 10, age_s=60, now=now)
    prune_logs(tmp_path, LogBounds(max_files=1, max_total_bytes=100, max_age_s=7 * DAY), now, in_use={running})
    assert names(tmp_path) == ["running"]


async def test_the_runner_keeps_its_logs_within_the_bounds(tmp_path: Path) -> None:
    logs = tmp_path / "data" / "tools" / "logs"
    logs.mkdir(parents=True)
    stale = make_log(logs, "20200101-000000-test-stale", 10, age_s=400 * DAY, now=time.time())
    hello = script(tmp_path / "hello.sh", "echo hello\n")
    async with runner(tmp_path, logs_max_files=3) as address:
        results = [await run_to_end(address, plan(tmp_path, [str(hello)])) for _ in range(5)]
    assert not stale.exists()  # pruned at start: past tools.logs_max_age_days
    kept = sorted(logs.glob("*.log"))
    assert len(kept) == 3 and {str(p) for p in kept} == {r.log_path for r in results[-3:]}
