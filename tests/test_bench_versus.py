"""bench.versus's own arithmetic: which turn is the median, and what the like-for-like run merges in."""

from __future__ import annotations

from bench.load import LoadResult, Measured
from bench.versus import LATER_FEATURES_OFF, _merged, median_turn

KEY = ("L0 hit", 20)


def _turn(rps: float, cpu_pct: float) -> dict[tuple[str, int], Measured]:
    load = LoadResult("wrk", 20, int(rps * 5), 5.0, 0, 0, 1.0, 2.0, 0.5)
    return {KEY: Measured(load, cpu_pct)}


def test_median_turn_is_the_middle_one_whole_not_the_best() -> None:
    turns = [_turn(2_100, 99), _turn(1_800, 98), _turn(1_900, 97), _turn(1_700, 96), _turn(1_850, 95)]
    middle = median_turn(turns, KEY)
    assert middle.load.rps == 1_850
    assert middle.server_cpu_pct == 95  # its CPU figure travels with it
    assert median_turn(turns[:4], KEY).load.rps == 1_800  # even count: the lower middle


def test_like_for_like_turns_off_l1_and_the_decision_log_and_keeps_the_rest() -> None:
    overlay = {"log": {"prompts": "none"}, "cache": {"l0": {"enabled": True}}}
    merged = _merged(overlay, LATER_FEATURES_OFF)
    assert merged == {"log": {"prompts": "none", "decisions": False},
                      "cache": {"l0": {"enabled": True}, "l1": {"enabled": False}}}
    assert overlay == {"log": {"prompts": "none"}, "cache": {"l0": {"enabled": True}}}  # not changed in place
