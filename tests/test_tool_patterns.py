"""DEV/LT patterns: a message that *is* the command scores 1.0; one that mentions it scores below 0.95."""

from __future__ import annotations

import pytest

from daari.tools.patterns import PARTIAL_WEIGHT, QUESTION_CAP, best_command, command_matches

LT_THRESHOLD = 0.95


@pytest.mark.parametrize(("message", "rule_id", "slots"), [
    ("git status", "DEV-01", {}),
    ("Git Status.", "DEV-01", {}),
    ("run git status please", "DEV-01", {}),
    ("`git status`", "DEV-01", {}),
    ("can you run git status?", "DEV-01", {}),
    ("git diff", "DEV-02", {}),
    ("git diff --staged", "DEV-02", {"staged": "--staged"}),
    ("run the tests please", "DEV-03", {}),
    ("Run tests", "DEV-03", {}),
    ("npm test", "DEV-03", {}),
    ("pytest", "DEV-03", {}),
    ("please run the linter for me", "DEV-04", {}),
    ("run lint", "DEV-04", {}),
    ("run ./scripts/ci-check.sh", "DEV-05", {"script": "./scripts/ci-check.sh"}),
    ("execute script ./tools/gen.py", "DEV-05", {"script": "./tools/gen.py"}),
    ("what did the tests say?", "DEV-06", {"kind": "tests"}),
    ("What did lint show", "DEV-06", {"kind": "lint"}),
    ("last test output", "DEV-06", {"kind": "test"}),
    ("run the tests again", "DEV-07", {"kind": "tests"}),
    ("re-run lint", "DEV-07", {"kind": "lint"}),
    ("build the project", "DEV-08", {}),
    ("Run eslint on src/", "LT-01", {"target": "src/"}),
    ("format the code", "LT-02", {}),
    ("show me the git status", "LT-03", {}),
    ("show the git diff", "LT-04", {}),
    ("Rename method foo to bar in UserService", "LT-05",
     {"kind": "method", "old": "foo", "new": "bar", "scope": "UserService"}),
    ("Optimize imports in User.java", "LT-06", {"target": "User.java"}),
])
def test_a_message_that_is_the_command_is_a_full_match(message: str, rule_id: str, slots: dict[str, str]) -> None:
    match = best_command(message)
    assert match is not None and match.rule_id == rule_id and match.confidence == 1.0
    assert match.slots == slots


@pytest.mark.parametrize("message", [
    "why does git status show untracked files?",
    "What does git diff --staged do?",
    "How do I make git status ignore build/?",
    "Is it safe to run the tests in parallel?",
    "explain what pytest fixtures are",
    "I ran git status and it printed nothing, what now",
    "git status && rm -rf ~",
    "git status; touch /tmp/x",
    "git status\nrm -rf /",
    "run ./scripts/x.sh; rm -rf /",
    "run the tests and then deploy to production",
    "Write a blog post about why git status is slow in big repos",
    "gіt status",  # Cyrillic i
    "git ſtatus",  # long s folds to s only under Unicode case folding
    "ｇｉｔ ｓｔａｔｕｓ",
    "rename method foo to bar; rm -rf /",
    "Rename method foo to bar in ../../etc",
    "git status " + "A" * 400,
])
def test_a_message_that_only_mentions_a_command_stays_below_the_lt_threshold(message: str) -> None:
    match = best_command(message)
    assert match is None or match.confidence < LT_THRESHOLD


def test_confidence_is_the_covered_share_and_questions_are_capped() -> None:
    partial = best_command("please tell the team that git status is clean")
    assert partial is not None and partial.rule_id == "DEV-01"
    assert partial.confidence == round(PARTIAL_WEIGHT * len("git status") / len(
        "please tell the team that git status is clean"), 3)
    question = best_command("git status?")
    assert question is not None and question.confidence == QUESTION_CAP
    assert best_command("hello there") is None and command_matches("") == []


def test_matches_come_best_first_and_ties_keep_the_dev_rules_first() -> None:
    matches = command_matches("run lint")
    assert [m.rule_id for m in matches][:2] == ["DEV-04", "LT-01"]
    assert matches[0].confidence == 1.0 and matches[1].confidence < 1.0
