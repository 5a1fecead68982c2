"""kill -9 of a real daari process during sustained L0 writes, twice on one data dir (bench/crash_safety.py runs
more rounds): both SQLite files pass `PRAGMA integrity_check`, every L0 row's checksum holds, daari restarts
cleanly, an L0 hit after a restart is the whole first answer, and no child process is left behind."""

from __future__ import annotations

from pathlib import Path

from bench.crash_safety import run
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread


def test_kill_9_during_l0_writes_leaves_whole_stores_and_a_clean_restart(tmp_path: Path) -> None:
    with serve_app_in_thread(FakeOpenAI()) as upstream:
        rounds = run(2, upstream, tmp_path, kill_after=30)
    kills, after_last = rounds[:-1], rounds[-1]
    for number, result in enumerate(kills):
        assert result.integrity == {"l0.sqlite": "ok", "decisions.sqlite": "ok"}, (number, result)
        assert result.answered >= 30 and result.l0_rows > 0 and result.l0_bad_rows == 0, (number, result)
        assert result.orphans == 0, "the decision log's writer outlived daari"
        assert not result.wrong_hits, result.wrong_hits
    assert kills[-1].decision_rows > 0
    # the answers stored before each kill are served whole after the restart that follows it
    assert kills[1].hits > 0 and after_last.hits > 0 and not after_last.wrong_hits
