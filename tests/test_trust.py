"""daari/trust: Wilson intervals, the answer comparison, learned bars, diversity, the sampling budget and the
shadow tier plan (pure functions, known inputs and outputs)."""

from __future__ import annotations

import pytest

from daari.trust.bars import LearnedBars, Sample, learn_bar
from daari.trust.compare import code_blocks, compare_answers, json_value, needs_embedding
from daari.trust.diversity import DiversityTracker
from daari.trust.plan import TierFacts, cache_tier, next_tier_up
from daari.trust.report import figures, summarize_trust, tier_agreement
from daari.trust.sampling import ShadowBudget
from daari.trust.wilson import rate, wilson


def test_wilson_matches_known_values() -> None:
    low, high = wilson(0, 20)
    assert low == 0.0 and high == pytest.approx(0.1611, abs=1e-4)  # "0 of 20 is not 0%": DESIGN.md
    low, high = wilson(10, 100)
    assert (low, high) == (pytest.approx(0.0552, abs=1e-4), pytest.approx(0.1744, abs=1e-4))
    assert wilson(5, 5) == (pytest.approx(0.5655, abs=1e-4), 1.0)
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(3, 2)
    assert rate(1, 4).to_json() == {"samples": 4, "disagreements": 1, "rate": 0.25,
                                    "interval": [0.0456, 0.6994]}


def test_the_interval_covers_the_true_rate_about_95_percent_of_the_time() -> None:
    import random

    draw = random.Random(7)
    covered = 0
    for _ in range(2000):
        k = sum(draw.random() < 0.2 for _ in range(50))
        low, high = wilson(k, 50)
        covered += low <= 0.2 <= high
    assert 0.93 <= covered / 2000 <= 0.97


@pytest.mark.parametrize(("cached", "fresh", "similarity", "outcome", "reason"), [
    ("Use `git status`.", "Use  `git status`.\n", None, "agree", "exact"),
    ('{"a": 1, "b": [2]}', '```json\n{"b": [2], "a": 1}\n```', None, "agree", "json"),
    ('{"a": 1}', '{"a": 2}', 0.99, "disagree", "json"),
    ('{"a": 1}', "The value of a is 1.", 0.9, "disagree", "json"),
    ("Here is how: run the script twice.", "I can't help with that.", 0.5, "disagree", "gate"),
    ("Run:\n```sh\ndocker ps\n```\nto list them.", "Try this:\n```sh\ndocker ps   \n```", None, "agree", "code"),
    ("```sh\ndocker ps\n```", "```sh\ndocker images\n```", 0.93, "disagree", "code"),
    ("```py\nx = 1\n```", "```py\ny = 1\n```", 0.98, "disagree", "code"),
    ("Delete the file with os.remove.", "Remove the file using os.remove.", None, "agree", "lexical"),
    ("Python lists are mutable sequences.", "Lists in Python can be changed after creation.", 0.93,
     "agree", "similarity"),
    ("Python lists are mutable sequences.", "Rust enums carry data.", 0.2, "disagree", "similarity"),
    ("Python lists are mutable sequences.", "Tuples cannot be changed.", 0.8, "undecided", "similarity"),
    ("Python lists are mutable sequences.", "Tuples cannot be changed.", None, "undecided", "no_embedding"),
])
def test_comparison(cached: str, fresh: str, similarity: float | None, outcome: str, reason: str) -> None:
    verdict = compare_answers(cached, fresh, similarity)
    assert (verdict.outcome, verdict.reason) == (outcome, reason)
    assert needs_embedding(cached, fresh) == (reason in ("similarity", "no_embedding"))


def test_code_blocks_and_json_are_read_as_written() -> None:
    assert code_blocks("a\n```python\nprint(1)  \n\n```\nb\n~~~\nx\n~~~") == ["print(1)", "x"]
    assert json_value("[1, 2]") == (True, [1, 2])
    assert json_value("not json {") == (False, None)
    assert json_value("{broken") == (False, None)


def test_a_bar_rises_above_false_hits_and_comes_back_with_agreeing_evidence() -> None:
    assert learn_bar([], 0.8, 0.02).bar == 0.8
    one_false_hit = [Sample(0.85, True)] + [Sample(0.9, False)] * 10
    bar = learn_bar(one_false_hit, 0.8, 0.02)
    assert bar.bar == 0.8501 and bar.raised and bar.disagreements_above == 0 and bar.served_above == 10
    # 1 false hit in 50+ samples at or above the floor is within 2%: the bar returns to the floor.
    bar = learn_bar([Sample(0.85, True)] + [Sample(0.9, False)] * 49, 0.8, 0.02)
    assert bar.bar == 0.8 and bar.served_above == 50 and bar.disagreements_above == 1
    # Never below the floor, whatever the samples under it say.
    assert learn_bar([Sample(0.5, True), Sample(0.95, False)], 0.8, 0.02).bar == 0.8
    # A false hit at similarity 1.0 cannot be excluded by similarity: the bar stops at 1.0.
    assert learn_bar([Sample(1.0, True)], 0.8, 0.02).bar == 1.0


def test_learned_bars_are_per_task_type_and_off_without_a_bound() -> None:
    bars = LearnedBars(0.8, 0.02)
    bars.fit({"explain": [Sample(0.9, True)], "generate_small": [Sample(0.9, False)]})
    assert bars.threshold("explain") == 0.9001 and bars.threshold("generate_small") == 0.8
    assert bars.threshold(None) == 0.8 and bars.threshold("other") == 0.8
    off = LearnedBars(0.8, None)
    off.fit({"explain": [Sample(0.9, True)]})
    assert off.threshold("explain") == 0.8 and off.to_json()["by_task_type"] == {}


def test_diversity_counts_distinct_answers_among_distinct_questions() -> None:
    tracker = DiversityTracker(window=10)
    for i in range(6):
        tracker.add("explain", f"q{i}", "same answer")
    for _ in range(5):
        tracker.add("edit", "q-retried", "answer")  # one question repeated is not a collapse
    rows = {d.task_type: d for d in tracker.summary()}
    assert rows["explain"].collapsed and rows["explain"].diversity == round(1 / 6, 4)
    assert not rows["edit"].collapsed and rows["edit"].diversity == 1.0 and rows["edit"].questions == 1
    for i in range(10):
        tracker.add("explain", f"new{i}", f"answer {i}")  # the window forgets the collapsed past
    assert tracker.summary()[1].to_json() == {"task_type": "explain", "hits": 16, "questions": 10, "answers": 10,
                                              "diversity": 1.0, "top_answer_share": 0.1, "collapsed": False}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_budget_holds_the_rate_the_minute_cap_and_the_day() -> None:
    clock = Clock()
    draws = iter([0.5, 0.01, 0.01, 0.01, 0.01])
    budget = ShadowBudget(0.02, 0.0, 2, 1000, clock=clock, draw=lambda: next(draws))
    assert not budget.drawn("cache") and budget.drawn("cache") and not budget.drawn("tier")
    assert budget.admit() is None and budget.admit() is None and budget.admit() == "minute_cap"
    clock.now += 60.0
    assert budget.admit() is None
    held = budget.reserve(400, 500)  # 400 * 1.25 + 500
    assert held == 1000 and budget.reserve(1, 1) is None and budget.left() == 0
    assert budget.admit() == "daily_budget"
    budget.settle(held, 700)
    assert budget.left() == 300 and budget.spent == 700
    clock.now += 86_400.0  # a new UTC day starts from zero
    assert budget.left() == 1000


FACTS = {"L3": TierFacts("embedded", False), "L4": TierFacts("ollama", False),
         "L5": TierFacts("openai", True), "L6": TierFacts("anthropic", False)}


def test_the_shadow_tier_is_planned_as_the_execute_step_would() -> None:
    configured = ["L3", "L4", "L5", "L6"]
    assert cache_tier("L4", configured, FACTS, in_process=False).tier == "L4"
    assert cache_tier("L3", configured, FACTS, in_process=False).skip == "in_process_tier"
    assert cache_tier("L3", configured, FACTS, in_process=True).tier == "L3"
    assert cache_tier("L5", configured, FACTS, in_process=False).skip == "forwarded_key"
    assert cache_tier(None, ["L4"], FACTS, in_process=False).tier == "L4"
    assert cache_tier("L3", [], FACTS, in_process=False).skip == "no_tier"
    assert cache_tier("L3", configured, FACTS, in_process=False, override="L6").tier == "L6"
    assert cache_tier("L3", ["L3"], FACTS, in_process=False, override="L6").skip == "no_tier"
    assert next_tier_up("L2", configured, FACTS, in_process=True).tier == "L3"
    assert next_tier_up("L3", configured, FACTS, in_process=False).tier == "L4"
    assert next_tier_up("L4", configured, FACTS, in_process=False).skip == "forwarded_key"
    assert next_tier_up("L4", ["L3", "L4"], FACTS, in_process=False).skip == "no_higher_tier"


def _row(level: str, outcome: str, **extra: object) -> dict[str, object]:
    return {"kind": "cache", "level": level, "asked_tier": "L4", "outcome": outcome, "task_type": "explain",
            "client": "curl", "rule_id": "R-A2", "similarity": None, "tokens": 10, "demoted": 0, **extra}


def test_report_figures_per_level_with_intervals() -> None:
    rows = [_row("L0", "agree")] * 8 + [_row("L0", "disagree")] * 2 + [_row("L0", "undecided")] \
        + [_row("L1", "disagree", similarity=0.85, demoted=1)]
    assert figures(r for r in rows if r["level"] == "L0") == {
        "samples": 11, "decided": 10, "undecided": 1, "disagreements": 2, "rate": 0.2, "interval": [0.0567, 0.5098]}
    report = summarize_trust(rows, {"minute_cap": 3}, [], LearnedBars(0.8, 0.02).to_json())
    assert report["shadow"]["L1"]["disagreements"] == 1 and report["trust"]["demoted"] == 1
    assert report["trust"]["by_client"]["curl"]["samples"] == 12 and report["trust"]["tokens_spent"] == 120
    tiers = tier_agreement([_row("L3", "agree", kind="tier"), _row("L3", "disagree", kind="tier")])
    assert tiers == [{"tier": "L3", "asked": "L4", "rule_id": "R-A2", "task_type": "explain", "samples": 2,
                      "decided": 2, "agreements": 1, "agreement_rate": 0.5, "interval": [0.0945, 0.9055]}]
