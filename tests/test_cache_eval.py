"""The L1 verifier's measured figures on evals/cache/verification.jsonl, pinned (real embedding model).

A change to the rules, the fold, the threshold or the corpus that moves a figure in either direction fails
here; update the figures below and in docs/caching.md together, on purpose.
"""

import json
from collections import Counter

import pytest

from daari.config import L1Config
from daari.eval.cache_eval import DEFAULT_SET, Scored, figures, load_pairs, main, score
from daari.semantic.minilm import MAX_TOKENS, load_minilm

# split -> (served, wrong) at the default config, for verify=lexical and cosine only (verify=none).
PINNED_LEXICAL = {"heldout": (36, 0), "tune": (82, 0)}
PINNED_COSINE = {"heldout": (82, 39), "tune": (198, 94)}


@pytest.fixture(scope="module")
def scored() -> list[Scored]:
    model = load_minilm()
    return score(load_pairs(DEFAULT_SET, model.seen_chars), model.embed, ["none", "lexical"])


def test_corpus_is_large_labeled_and_covers_the_near_miss_kinds() -> None:
    rows = [json.loads(line) for line in DEFAULT_SET.read_text().splitlines()]
    assert len(rows) >= 300
    assert len({r["id"] for r in rows}) == len(rows)
    splits = Counter(r["split"] for r in rows)
    assert splits["heldout"] >= 90 and splits["tune"] >= 200
    kinds = {r["kind"] for r in rows}
    assert {"paraphrase", "number", "unit", "version", "port", "flag", "negation", "antonym", "swap", "code",
            "image", "agent"} <= kinds
    assert {r["label"] for r in rows} == {0, 1}


@pytest.mark.parametrize("split", ["heldout", "tune"])
def test_default_config_figures_are_pinned(scored: list[Scored], split: str) -> None:
    threshold = L1Config().similarity_threshold
    part = [s for s in scored if s.pair.split == split]
    lexical = figures(part, "lexical", threshold)
    cosine = figures(part, "none", threshold)
    assert (lexical.served, lexical.false_hits) == PINNED_LEXICAL[split]
    assert (cosine.served, cosine.false_hits) == PINNED_COSINE[split]


def test_default_config_meets_the_target_and_cosine_alone_does_not(scored: list[Scored]) -> None:
    threshold = L1Config().similarity_threshold
    lexical, cosine = figures(scored, "lexical", threshold), figures(scored, "none", threshold)
    assert lexical.precision >= 0.99 and lexical.recall >= 0.60
    assert cosine.precision < 0.60


def test_pairs_with_different_context_are_never_served(scored: list[Scored]) -> None:
    different = [s for s in scored if not s.pair.same_context]
    assert different  # changed tool results, system prompts, tool sets
    assert all(s.pair.label == 0 for s in different)


def test_long_prompt_is_cut_where_the_model_stops_reading() -> None:
    model = load_minilm()
    long_text = "user: " + " ".join(f"word{i}" for i in range(400))
    (seen,) = model.seen_chars([long_text])
    assert 0 < seen < len(long_text)
    assert model.token_count(long_text[:seen]) == MAX_TOKENS - 2
    assert model.seen_chars(["user: short"]) == [len("user: short")]


def test_eval_command_prints_each_split_and_cosine_beside(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--public-limit", "0", "--verify", "lexical"]) == 0
    out = capsys.readouterr().out
    assert "[heldout]" in out and "[tune]" in out
    assert "verify=none" in out and "verify=lexical" in out and "sweep" in out
