"""verify: pair_model — its features read order and roles, its vetoes hold, its committed weights load and
decide, and the VerifierActor serves it (docs/caching.md, "pair_model")."""

import json
from pathlib import Path

import pytest
import trio

from actors.verifier import VerifierActor, Verify
from daari.semantic.pair_features import FEATURE_NAMES, order_features, pair_features, veto, words
from daari.semantic.pair_model import (
    WEIGHTS,
    PairModelError,
    load_pair_model,
    pair_model_from_json,
    pair_model_verdict,
)


def feature(a: str, b: str, name: str, cosine: float = 0.95) -> float:
    return float(pair_features(a, b, cosine)[FEATURE_NAMES.index(name)])


def test_a_swap_reverses_order_and_changes_both_neighbours_a_moved_clause_does_not() -> None:
    swapped = ("He was born in Paris and later moved to London", "He was born in London and later moved to Paris")
    moved = ("In 1990 he moved to London", "He moved to London in 1990")
    assert feature(*swapped, "word_discordant_share") > 0
    assert feature(*swapped, "word_context_changed") == 2  # both names sit between other words now
    assert feature(*moved, "word_context_changed") == 0  # "moved to London" kept its neighbours
    assert feature(*swapped, "bigram_dice") < feature(*moved, "bigram_dice")


def test_items_joined_by_or_may_trade_places() -> None:
    a, b = "Should I use SQLite or Postgres for a small app?", "Should I use Postgres or SQLite for a small app?"
    assert feature(a, b, "word_discordant_share") == 0
    # json/yaml traded places around "to": json-to, to-yaml and json-yaml are each in the other order
    assert order_features(words("convert JSON to YAML"), words("convert YAML to JSON"))[1] == 3


def test_a_paraphrase_keeps_its_content_words_and_the_same_text_is_identical_everywhere() -> None:
    a, b = "How do I delete a file in Python?", "How can I remove a file with Python?"
    assert feature(a, b, "content_jaccard") == 1.0  # delete/remove fold onto one word
    assert feature(a, b, "content_only_one_side") == 0
    same = pair_features(a, a, 1.0)
    assert same[FEATURE_NAMES.index("word_lcs_of_longer")] == 1.0
    assert same[FEATURE_NAMES.index("word_discordant_pairs")] == 0
    assert len(same) == len(FEATURE_NAMES)


def test_a_reworded_near_miss_differs_in_content_words() -> None:
    a, b = "What's the command to list Kubernetes pods?", "How do I list Kubernetes services?"
    assert feature(a, b, "content_only_one_side") == 2  # pod / service; the framing is ignored


@pytest.mark.parametrize(("a", "b", "rule"), [
    ("How do I enable 2FA on my GitHub account?", "How do I disable 2FA on my GitHub account?", "antonym"),
    ("How do I turn on dark mode in VS Code?", "How do I turn off dark mode in VS Code?", "antonym"),
    ("How do I zoom in in the terminal?", "How do I zoom out in the terminal?", "antonym"),
    ("Show the last 20 lines of the log", "Show the last 200 lines of the log", "number"),
    ("Find all files owned by root", "Find all files not owned by root", "negation"),
    ("Convert Celsius to Fahrenheit in JavaScript", "Convert Fahrenheit to Celsius in JavaScript", "swap"),
])
def test_hard_vetoes_reject_before_the_model(a: str, b: str, rule: str) -> None:
    verdict = veto(a, b)
    assert verdict is not None and not verdict.same and verdict.rule == rule
    assert veto(b, a) is not None


def test_a_paraphrase_passes_the_vetoes() -> None:
    assert veto("How do I turn on 2FA for my GitHub account?", "How do I enable 2FA on my GitHub account?") is None


def test_committed_weights_load_and_decide() -> None:
    model = load_pair_model()
    assert model.feature_names == FEATURE_NAMES and 0.5 <= model.threshold < 1 and len(model.trees) >= 50
    served = pair_model_verdict(model, "user: How do I upgrade pip itself?", "user: Update pip to the newest version",
                                0.85)
    assert served.same, served
    rejected = pair_model_verdict(model, "user: Which is the best book to learn about physics?",
                                  "user: Which is the best book to learn physics from scratch?", 0.5)
    assert not rejected.same and rejected.rule == "pair_model"
    p_high = model.probability(pair_features("user: a b c", "user: a b c", 1.0).tolist())
    p_low = model.probability(pair_features("user: a b c", "user: a b c", 0.6).tolist())
    assert p_high > p_low  # a higher cosine never makes the same pair less likely


def test_weights_for_other_features_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    data = json.loads(WEIGHTS.read_text())
    data["features"] = data["features"][:-1]
    with pytest.raises(PairModelError, match="retrain"):
        pair_model_from_json(data)
    broken = tmp_path / "weights.json"
    broken.write_text("{not json")
    with pytest.raises(PairModelError, match="not readable"):
        load_pair_model(broken)


async def test_verifier_actor_loads_the_trees_in_the_background_and_uses_the_cosine() -> None:
    actor = VerifierActor("pair_model")
    a, b = "user: How do I clear the terminal screen?", "user: Clear my terminal"
    # Before the trees are loaded: the lexical rules answer (never less strict than the old default).
    assert (await actor.verify(Verify(a, b, 0.89))).rule == "content_word"
    async with actor.lifespan():
        with trio.fail_after(30):
            await actor.loaded.wait()
        assert actor.pair_model is not None
        verdict = await actor.verify(Verify(a, b, 0.89))
        assert verdict.same and verdict.detail.startswith("pair_model")
        no_cosine = await actor.verify(Verify(a, b))  # a caller that sends no cosine gets the lexical rules
        assert no_cosine.rule == "content_word"
        swapped = await actor.verify(Verify("user: Convert this JSON to YAML", "user: Convert this YAML to JSON", 0.99))
        assert not swapped.same and swapped.rule == "swap"
