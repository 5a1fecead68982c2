"""evals/cache/qqp_frontier.py: the rules that sort QQP's false hits into classes (label noise by a strict and a
loose rule, question word, reordering, a qualifier on one side) say what their docstring says
(docs/caching.md, "Why QQP stays below 95%, measured")."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evals/cache"))

from qqp_frontier import EXTRA_NAMES, classify, extra_features, idf_table, is_question, plain  # noqa: E402

TEXTS = ["user: How do I list Docker containers?", "user: What is the capital of Canada?",
         "user: Which book is best to know indian customs?", "user: How do I cope with stress?"]
IDF = idf_table(TEXTS)
RARE = sorted(IDF.values())[len(IDF) // 2]


def kind(a: str, b: str) -> str:
    return classify(f"user: {a}", f"user: {b}", IDF, RARE)


def test_the_strict_noise_rule_folds_endings_articles_and_punctuation_but_keeps_symbols() -> None:
    assert kind("Which book is best to know indian custom?", "Which book is best to know the indian customs") \
        == "identical_words"
    assert plain("user: the difference between # and ## in python?") \
        != plain("user: the difference between () and (,) in Python?")
    assert kind("What is the difference between # and ## in python?",
                "What is the difference between () and (,) in Python?") != "identical_words"


def test_the_loose_noise_rule_needs_the_same_content_order_and_question_word() -> None:
    assert kind("How can I control sleep?", "How do you control your sleep?") == "same_question"
    assert kind("Is there any problem with Quora?", "What is the problem with Quora?") == "wh_word"
    assert kind("How do you convert current source to voltage source?",
                "How do you convert voltage source to current source?") == "reordered"


def test_a_qualifier_on_one_side_is_an_extra_constraint_a_changed_name_a_different_entity() -> None:
    assert kind("How do I cope with a temporary and long distance relationship?",
                "How do I cope with a long distance relationship?") == "extra_constraint"
    assert kind("How do I unfollow everyone on Twitter?", "How do I unfollow everyone on Instagram?") \
        == "different_entity"


def test_focus_features_see_the_superset_and_the_question_word() -> None:
    unseen = max(IDF.values())
    same = dict(zip(EXTRA_NAMES, extra_features("user: How do I cope with stress?",
                                                "user: How do I cope with stress?", IDF, unseen), strict=True))
    more = dict(zip(EXTRA_NAMES, extra_features("user: How do I cope with stress at work?",
                                                "user: How do I cope with stress?", IDF, unseen), strict=True))
    asked = dict(zip(EXTRA_NAMES, extra_features("user: What is stress?", "user: Is stress?", IDF, unseen),
                     strict=True))
    assert same["superset_extra"] == 0 and same["idf_only_max_side"] == 0 and same["wh_word_differs"] == 0
    assert more["superset_extra"] == 1 and more["idf_only_max_side"] == unseen and more["wh_word_differs"] == 0
    assert asked["wh_word_differs"] == 1 and asked["superset_extra"] == 0
    assert is_question("user: How do I list pods") and is_question("user: pods?")
    assert not is_question("user: List the pods")
