"""`daari eval trust`'s figures, pinned on a small seeded slice (real embedding model and pair model, the
committed corpus's held-out split and a seeded sample of the public report halves in ../shared/data).

A change to the bars' estimator, the verifiers, the fold, the floor, the classifier (the bars are per task
type) or the corpus that moves a figure in either direction fails here; update the figures below, and the
table in docs/caching.md from a full run, together and on purpose.
"""

import json
from typing import Any

import pytest

from daari.config import L1Config
from daari.eval.cache_eval import DEFAULT_SET, PAWS_FILE, QQP_FILE, Pair, Scored, shared_data_dir
from daari.eval.trust_eval import BOUNDS, MODES, SEED, main, run, seeded_sample, split_halves, upper_bound_estimator
from daari.trust.bars import Sample, learn_bar

SLICE = 300  # pairs of each public report half (seeded sample): the whole eval takes minutes, this seconds
# (set, verify mode, bound; None: the fixed threshold) -> (served, false hits) on the measured half.
PINNED: dict[tuple[str, str, float | None], tuple[int, int]] = {
    ("corpus_heldout", "none", None): (84, 43), ("corpus_heldout", "none", 0.01): (2, 0),
    ("corpus_heldout", "none", 0.02): (2, 0), ("corpus_heldout", "none", 0.05): (2, 0),
    ("corpus_heldout", "lexical", None): (21, 1), ("corpus_heldout", "lexical", 0.01): (2, 0),
    ("corpus_heldout", "lexical", 0.02): (2, 0), ("corpus_heldout", "lexical", 0.05): (2, 0),
    ("corpus_heldout", "pair_model", None): (34, 0), ("corpus_heldout", "pair_model", 0.01): (34, 0),
    ("corpus_heldout", "pair_model", 0.02): (34, 0), ("corpus_heldout", "pair_model", 0.05): (34, 0),
    ("paws_report", "none", None): (150, 75), ("paws_report", "none", 0.01): (3, 0),
    ("paws_report", "none", 0.02): (3, 0), ("paws_report", "none", 0.05): (3, 0),
    ("paws_report", "lexical", None): (28, 6), ("paws_report", "lexical", 0.01): (2, 0),
    ("paws_report", "lexical", 0.02): (2, 0), ("paws_report", "lexical", 0.05): (2, 0),
    ("paws_report", "pair_model", None): (22, 1), ("paws_report", "pair_model", 0.01): (22, 1),
    ("paws_report", "pair_model", 0.02): (22, 1), ("paws_report", "pair_model", 0.05): (22, 1),
    ("qqp_report", "none", None): (94, 36), ("qqp_report", "none", 0.01): (17, 6),
    ("qqp_report", "none", 0.02): (17, 6), ("qqp_report", "none", 0.05): (25, 6),
    ("qqp_report", "lexical", None): (13, 3), ("qqp_report", "lexical", 0.01): (12, 2),
    ("qqp_report", "lexical", 0.02): (12, 2), ("qqp_report", "lexical", 0.05): (12, 2),
    ("qqp_report", "pair_model", None): (35, 8), ("qqp_report", "pair_model", 0.01): (10, 2),
    ("qqp_report", "pair_model", 0.02): (10, 2), ("qqp_report", "pair_model", 0.05): (10, 2),
}


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    data = shared_data_dir()
    if not (data / PAWS_FILE).exists() or not (data / QQP_FILE).exists():
        pytest.skip(f"the public labeled files are not in {data}")
    return run(DEFAULT_SET, data, MODES, L1Config().similarity_threshold, BOUNDS, SEED, SLICE,
               out=lambda _line: None)


def test_every_figure_is_pinned(rows: list[dict[str, Any]]) -> None:
    measured = {(r["set"], r["mode"], r["bound"]): (r["served"], r["false_hits"]) for r in rows}
    assert measured == PINNED


def test_each_set_is_cut_in_two_halves(rows: list[dict[str, Any]]) -> None:
    sizes = {r["set"]: (r["fit_pairs"], r["measured_pairs"]) for r in rows}
    assert sizes == {"corpus_heldout": (84, 84), "paws_report": (SLICE // 2, SLICE // 2),
                     "qqp_report": (SLICE // 2, SLICE // 2)}


def test_the_sample_and_the_halves_are_seeded_and_disjoint() -> None:
    pairs = [Pair(str(i), "report", "qqp", i % 2, f"user: a{i}", f"user: b{i}", True) for i in range(100)]
    sample = seeded_sample(pairs, 40, SEED)
    assert len(sample) == 40 and sample == seeded_sample(pairs, 40, SEED) != seeded_sample(pairs, 40, SEED + 1)
    assert [int(p.id) for p in sample] == sorted(int(p.id) for p in sample)  # file order kept
    assert seeded_sample(pairs, None, SEED) == pairs == seeded_sample(pairs, 500, SEED)
    scored = [Scored(p, 0.9, {}) for p in pairs]
    fit_on, measure_on = split_halves(scored, SEED)
    assert (fit_on, measure_on) == split_halves(scored, SEED)
    assert len(fit_on) == len(measure_on) == 50
    assert {s.pair.id for s in fit_on} | {s.pair.id for s in measure_on} == {p.id for p in pairs}
    assert fit_on != scored[:50]  # shuffled, not the file's first half


def test_learned_bars_serve_a_subset_and_meet_the_bound_where_they_were_fit(rows: list[dict[str, Any]]) -> None:
    fixed = {(r["set"], r["mode"]): r for r in rows if r["bound"] is None}
    for r in rows:
        if r["bound"] is None:
            continue
        # A bar is never below the floor: never more served, nor more false hits, than the fixed threshold.
        base = fixed[(r["set"], r["mode"])]
        assert r["served"] <= base["served"] and r["false_hits"] <= base["false_hits"]
        # On the half they were fit on, the served rate is within the bound unless a bar stopped at 1.0.
        if not any(bar >= 1.0 for bar in r["raised"].values()):
            assert r["fit_false_hits"] <= r["bound"] * r["fit_served"], r


def test_the_upper_bound_variants_need_more_evidence_than_the_servers_estimator() -> None:
    wilson, shut = upper_bound_estimator(False), upper_bound_estimator(True)
    clean = [Sample(0.9, False)] * 30
    # No false hit: the only candidate is the floor; 30 clean samples do not prove 2%, so the shutting variant
    # closes L1 for the type while the server's estimator (and the other variant) keep the floor.
    assert learn_bar(clean, 0.8, 0.02).bar == wilson(clean, 0.8, 0.02) == 0.8 and shut(clean, 0.8, 0.02) == 1.0
    # One false hit in 101: within 2% observed, not by its upper bound (5.4%), nor above it (0 of 100: 3.7%).
    some = [Sample(0.85, True)] + [Sample(0.9, False)] * 100
    assert learn_bar(some, 0.8, 0.02).bar == 0.8
    assert wilson(some, 0.8, 0.02) == 0.8501 and shut(some, 0.8, 0.02) == 1.0
    # One in 301: the upper bound (1.85%) is within 2% too, so every estimator is back at the floor.
    many = [Sample(0.85, True)] + [Sample(0.9, False)] * 300
    assert learn_bar(many, 0.8, 0.02).bar == wilson(many, 0.8, 0.02) == shut(many, 0.8, 0.02) == 0.8


def test_eval_command_prints_rows_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--public-limit", "0", "--verify", "none", "--bound", "0.02", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["seed"] == SEED and {r["set"] for r in report["rows"]} == {"corpus_heldout"}
    assert [(r["mode"], r["bound"]) for r in report["rows"]] == [("none", None), ("none", 0.02)]
    assert main(["--public-limit", "0", "--verify", "none", "--bound", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "corpus held back" in out and "fixed threshold" in out and "bound 0.02" in out
    assert main(["--verify", "nonsense"]) == 2
    assert main(["--sets", "nonsense"]) == 2
