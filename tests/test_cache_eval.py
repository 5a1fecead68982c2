"""The L1 verifiers' measured figures, pinned per set and mode (real embedding model, the committed corpus
and the public files in ../shared/data).

A change to the rules, the pair model's weights, the fold, the threshold or the corpus that moves a figure
in either direction fails here; update the figures below and in docs/caching.md together, on purpose.
"""

import json
from collections import Counter
from typing import Any

import pytest

from daari.config import L1Config
from daari.eval.cache_eval import (
    DEFAULT_SET,
    PAWS_FILE,
    QQP_FILE,
    Scored,
    figures,
    load_pairs,
    main,
    members,
    read_paws,
    read_qqp,
    score,
    shared_data_dir,
    table,
)
from daari.semantic.minilm import MAX_TOKENS, load_minilm

MODES = ["none", "lexical", "pair_model"]
# (set, mode) -> (served, wrong) at the default config (threshold and weights as committed).
PINNED: dict[tuple[str, str], tuple[int, int]] = {
    ("corpus_heldout", "none"): (161, 79), ("corpus_heldout", "lexical"): (45, 5),
    ("corpus_heldout", "pair_model"): (67, 0),
    ("paws_report", "none"): (3988, 2210), ("paws_report", "lexical"): (867, 331),
    ("paws_report", "pair_model"): (657, 29),
    ("qqp_report", "none"): (1208, 450), ("qqp_report", "lexical"): (173, 24), ("qqp_report", "pair_model"): (394, 63),
    ("negation_antonym", "none"): (72, 72), ("negation_antonym", "lexical"): (0, 0),
    ("negation_antonym", "pair_model"): (0, 0),
}
# The targets each mode meets (issue 18): the default must meet every one it can; QQP's is out of reach of
# every mode (docs/caching.md, "Why QQP stays below 95%").
MEETS = {
    "pair_model": {"corpus_heldout", "paws_report", "negation_antonym"},
    "lexical": {"negation_antonym"},
    "none": set(),
}


@pytest.fixture(scope="module")
def scored() -> list[Scored]:
    data = shared_data_dir()
    if not (data / PAWS_FILE).exists() or not (data / QQP_FILE).exists():
        pytest.skip(f"the public labeled files are not in {data}")
    model = load_minilm()
    pairs = load_pairs(DEFAULT_SET, model.seen_chars)
    public = [p for p in read_paws(data / PAWS_FILE) + read_qqp(data / QQP_FILE) if p.split == "report"]
    return score(pairs + public, model.embed, MODES)


@pytest.fixture(scope="module")
def rows(scored: list[Scored]) -> list[dict[str, Any]]:
    return table(scored, MODES, L1Config().similarity_threshold)


def test_corpus_is_large_labeled_and_covers_the_near_miss_kinds() -> None:
    rows = [json.loads(line) for line in DEFAULT_SET.read_text().splitlines()]
    assert len(rows) >= 500
    assert len({r["id"] for r in rows}) == len(rows)
    splits = Counter(r["split"] for r in rows)
    assert splits["heldout"] >= 160 and splits["tune"] >= 340
    kinds = {r["kind"] for r in rows}
    assert {"paraphrase", "number", "unit", "version", "port", "flag", "negation", "antonym", "swap", "role",
            "code", "image", "agent"} <= kinds
    assert {r["label"] for r in rows} == {0, 1}


def test_public_files_split_by_id_and_line_number() -> None:
    data = shared_data_dir()
    if not (data / PAWS_FILE).exists():
        pytest.skip(f"the public labeled files are not in {data}")
    paws, qqp = read_paws(data / PAWS_FILE), read_qqp(data / QQP_FILE)
    assert all((int(p.id.split("-")[1]) % 2 == 1) == (p.split == "tune") for p in paws + qqp)
    assert Counter(p.split for p in paws) == {"tune": 4000, "report": 4000}
    assert Counter(p.split for p in qqp) == {"tune": 2000, "report": 2000}


def test_every_figure_is_pinned(rows: list[dict[str, Any]]) -> None:
    measured = {(r["set"], r["mode"]): (r["served"], r["false_hits"]) for r in rows}
    assert measured == PINNED


def test_targets_met_per_mode(rows: list[dict[str, Any]]) -> None:
    for mode, sets in MEETS.items():
        met = {r["set"] for r in rows if r["mode"] == mode and r["met"]}
        assert met == sets, mode


def test_the_default_mode_meets_the_most_targets(rows: list[dict[str, Any]]) -> None:
    default = L1Config().verify
    assert default == "pair_model"
    assert MEETS[default] >= MEETS["lexical"] and MEETS[default] > MEETS["lexical"]


def test_pairs_with_different_context_are_never_served(scored: list[Scored]) -> None:
    different = [s for s in scored if not s.pair.same_context]
    assert different  # changed tool results, system prompts, tool sets
    assert all(s.pair.label == 0 for s in different)
    assert figures(different, "pair_model", 0.0).served == 0


def test_negation_and_antonym_pairs_are_never_served(scored: list[Scored]) -> None:
    pairs = members("negation_antonym", scored)
    assert len(pairs) >= 60
    assert figures(pairs, "pair_model", 0.0).served == 0  # at any threshold: the vetoes hold
    assert figures(pairs, "none", L1Config().similarity_threshold).served > 40  # cosine alone would serve them


def test_long_prompt_is_cut_where_the_model_stops_reading() -> None:
    model = load_minilm()
    long_text = "user: " + " ".join(f"word{i}" for i in range(400))
    (seen,) = model.seen_chars([long_text])
    assert 0 < seen < len(long_text)
    assert model.token_count(long_text[:seen]) == MAX_TOKENS - 2
    assert model.seen_chars(["user: short"]) == [len("user: short")]


def test_eval_command_prints_the_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--public-limit", "0", "--verify", "pair_model"]) == 0
    out = capsys.readouterr().out
    assert "corpus held back" in out and "negation and antonym pairs" in out and "sweep" in out
    assert "pair_model" in out and "precision >= 99%, recall >= 80%" in out
    assert main(["--public-limit", "0", "--verify", "lexical", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {r["mode"] for r in report["rows"]} == {"none", "lexical"}
    assert {r["set"] for r in report["rows"]} == {"corpus_heldout", "negation_antonym"}
