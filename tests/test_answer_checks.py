"""Answers against their stated format (daari/trust/format_check.py) and the checks that need no format
(repetition, a copied prompt, a short answer cut by max_tokens): daari/trust/answer_check.py."""

from __future__ import annotations

import random

import pytest

from daari.eval.judge_set import parse_request
from daari.protocol.chat import Completion
from daari.routing.classifier import classify
from daari.trust.answer_check import answer_violations
from daari.trust.degenerate import (
    ARRAY_FROM_WORDS,
    MIN_RUN_TOKENS,
    PHRASE_RUN,
    WORD_RUN,
    _phrase_run,
    copied_span,
    mostly_echo,
    runaway_repetition,
)
from daari.trust.format_check import count_sentences, count_words, format_violations
from daari.trust.stated_format import read_stated_format
from evals.judge import judge_prompts as jp

AIDER = read_stated_format(parse_request(jp.aider_commit("http-retry")))
CLAUDE_TITLE = read_stated_format(parse_request(jp.claude_title(jp.CONVERSATIONS["flaky-test"])))
TOPIC = read_stated_format(parse_request(jp.claude_topic("now add rate limiting")))
SESSION_TITLE = read_stated_format(parse_request(jp.claude_session_title("add CSV export")))


@pytest.mark.parametrize(("answer", "expected"), [
    ("feat: retry fetch_json on connection errors", ()),
    ("fix(http): retry on connection errors", ()),
    ("Fix: retry on connection errors", ()),
    ("feat!: drop python 3.8 support", ()),
    ("\"feat: retry fetch_json on connection errors\"", ()),  # aider strips the quotes itself
    ("# diffs:\n#\n#\n#", ("one_line", "prefix", "extra_text")),  # SmolLM2's answer in the issue, cut short
    ("Retry fetch_json on connection errors", ("prefix",)),
    ("feature: retry fetch_json", ("prefix",)),
    ("feat: retried fetch_json on errors", ("imperative",)),
    ("feat: adding retries to fetch_json", ("imperative",)),
    ("feat: adds retries to fetch_json", ("imperative",)),
    ("feat: add exponential backoff retries to fetch_json for connection errors and timeouts", ("char_count",)),
    ("feat: add retries\n\nRetries three times.", ("one_line",)),
    ("Sure! feat: add retries", ("prefix", "extra_text")),
    ("```\nfeat: add retries\n```", ("one_line", "prefix", "extra_text")),
])
def test_aider_commit_messages(answer: str, expected: tuple[str, ...]) -> None:
    assert format_violations(answer, AIDER) == expected


@pytest.mark.parametrize(("answer", "expected"), [
    ("Fix flaky upload retry test on CI", ()),
    ("Flaky upload test fix", ("word_count",)),
    ("Fixing the flaky test_upload_retries test by replacing sleep with an event", ("word_count", "char_count")),
    ("Title: Fix flaky upload retry test", ("extra_text",)),
    ("Fix flaky upload retry test on CI\n\nThis title says what was fixed.", ("word_count", "char_count",
                                                                            "extra_text")),
])
def test_claude_code_titles(answer: str, expected: tuple[str, ...]) -> None:
    assert format_violations(answer, CLAUDE_TITLE) == expected


@pytest.mark.parametrize(("answer", "expected"), [
    ('{"isNewTopic": true, "title": "API rate limiting"}', ()),
    ('{"isNewTopic": false, "title": null}', ()),
    ('{"isNewTopic": "yes", "title": "Rate limiting"}', ("json_keys",)),
    ('{"isNewTopic": true}', ("json_keys",)),
    ('{"isNewTopic": true, "title": "Adding rate limiting to every API endpoint"}', ("word_count",)),
    ('```json\n{"isNewTopic": true, "title": "Rate limiting"}\n```', ("json",)),
    ("Yes, this is a new topic: rate limiting.", ("json",)),
])
def test_claude_code_topic_checks(answer: str, expected: tuple[str, ...]) -> None:
    assert format_violations(answer, TOPIC) == expected


@pytest.mark.parametrize(("answer", "expected"), [
    ('{"title": "Add CSV export to reports"}', ()),
    ('{"title": "Add CSV Export To Reports Page"}', ("sentence_case",)),
    ('{"title": "CSV"}', ("word_count",)),
    ('{"title": "Add CSV export", "tags": ["csv"]}', ("json_keys",)),
    ('```json\n{"title": "Add CSV export"}\n```', ("json", "code_fence_forbidden")),
])
def test_claude_code_session_titles_with_a_schema(answer: str, expected: tuple[str, ...]) -> None:
    assert format_violations(answer, SESSION_TITLE) == expected


def test_language_checks_only_plain_cases() -> None:
    german = read_stated_format(parse_request(jp.aider_commit("readme-typo", "German")))
    assert format_violations("docs: Tippfehler in README korrigieren", german) == ()
    assert format_violations("docs: fix typo in README", german) == ("language",)
    opencode = read_stated_format(parse_request(jp.opencode_title("x")))
    spanish = "¿Cómo agrego autenticación con JWT a mi API de Express?"
    assert format_violations("Autenticación JWT en API de Express", opencode, spanish) == ()
    assert format_violations("JWT authentication for Express API", opencode, spanish) == ("language",)
    assert format_violations("JWT in Express", opencode, spanish) == ()  # too little to tell: not flagged
    chinese = "如何在 Express 中添加 JWT 认证？"
    assert format_violations("Express 中的 JWT 认证", opencode, chinese) == ()
    assert format_violations("Adding JWT auth to the Express API", opencode, chinese) == ("language",)


def test_counts() -> None:
    assert count_words("app.js failure investigation") == 3
    assert count_words("Fix login — on mobile") == 4
    assert count_sentences("I added x, e.g. a flag. Then I fixed y! Done") == 3
    assert count_sentences("Use `os.path.join()`. It works.") == 2
    assert count_sentences("## Summary\n\n- Added an index\n- Ran the tests") == 3


def test_runaway_repetition() -> None:
    assert runaway_repetition("# diffs:\n" + "#\n" * 60)
    assert runaway_repetition("The answer is " + "very " * 30 + "good.")
    assert runaway_repetition("Install it with pip. " * 40)
    assert not runaway_repetition("[" + ", ".join(["0"] * 50) + "]")  # numbers repeat in real data
    code = "\n".join(f"    assert parse({i}) == {i}" for i in range(12))
    assert not runaway_repetition(code)
    assert not runaway_repetition("}\n}\n}\n}\n")


def _phrase_run_by_word(tokens: list[str], prompt: str) -> bool:
    """The phrase-run rule word by word, as it was written before its C-speed form: the reference it must match."""
    for size in range(1, 9):
        needed = WORD_RUN if size == 1 else PHRASE_RUN
        span = max((needed - 1) * size, MIN_RUN_TOKENS - size)
        run = 0
        for i in range(len(tokens) - size):
            run = run + 1 if tokens[i] == tokens[i + size] else 0
            if run >= span:
                unit = tokens[i + 1 - size:i + 1]
                if any(any(c.isalpha() for c in t) for t in unit) and " ".join(unit * needed) not in prompt:
                    return True
    return False


def test_the_phrase_run_matches_its_word_by_word_rule() -> None:
    """Token lists from small vocabularies (so units repeat, back to back or nearly), with numbers (no letters:
    never a loop) and prompts that hold some of the runs (copied material): both forms agree on every one, and
    both outcomes occur."""
    rng = random.Random(23)
    outcomes = set()
    for case in range(3000):
        vocabulary = ["go", "to", "the", "7", "42", "run", "it"][:rng.randint(1, 7)]
        tokens = [rng.choice(vocabulary) for _ in range(rng.randint(0, 2 * ARRAY_FROM_WORDS))]  # both forms
        if case % 3 == 0:  # a real loop inside ordinary text
            unit = [rng.choice(vocabulary) for _ in range(rng.randint(1, 8))]
            at = rng.randint(0, len(tokens))
            tokens[at:at] = unit * rng.randint(2, 7)
        prompt = " ".join(tokens[rng.randint(0, len(tokens)):]) if case % 4 == 0 else "what does this do"
        expected = _phrase_run_by_word(tokens, prompt)
        assert _phrase_run(tokens, prompt) == expected, (tokens, prompt)
        outcomes.add(expected)
    assert outcomes == {True, False}


def test_a_short_answer_that_copies_the_prompt() -> None:
    prompt = "I have a monorepo with three services (api, worker, web) and the worker keeps timing out"
    assert copied_span("I have a monorepo with three services", prompt) == 7
    assert mostly_echo("I have a monorepo with three services (api, worker, web)", prompt)
    assert not mostly_echo("Worker timeouts in a three-service monorepo", prompt)
    assert not mostly_echo("Add OAuth authentication", "Add OAuth authentication to the app")  # too short to tell


def test_answer_violations_reads_the_request_and_the_finish_reason() -> None:
    request = parse_request(jp.aider_commit("parse-date-test"))
    classification = classify(request)
    runaway = Completion(text="#\n" * 64, finish_reason="length")
    assert answer_violations(request, runaway, classification.task_type, classification.rule_id) == (
        "one_line", "char_count", "prefix", "truncated", "repetition")
    good = Completion(text="test: add tests for parse_date")
    assert answer_violations(request, good, classification.task_type, classification.rule_id) == ()
    # A long-form answer cut by the client's max_tokens is what the client asked for.
    explain = parse_request(jp.openai([jp.user("Explain what a Python decorator is.")], max_tokens=20))
    cut = Completion(text="A decorator is a function that wraps another function to", finish_reason="length")
    assert answer_violations(explain, cut, "generate_small", "R-A3") == ()


def test_probes_are_never_judged() -> None:
    probe = parse_request(jp.openai([jp.user("quota")], max_tokens=1))
    assert answer_violations(probe, Completion(text="#\n" * 10, finish_reason="length")) == ()


def test_repetition_the_prompt_has_too_is_not_a_loop() -> None:
    code = "def f(x):\n    return x * 2\n" * 40
    assert runaway_repetition(code) and not runaway_repetition(code, "Explain this file:\n" + code)
    words = "lorem ipsum dolor " * 50
    assert runaway_repetition(words) and not runaway_repetition(words, "question 1: " + words)
    assert runaway_repetition("# diffs:\n" + "#\n" * 60, "diff --git a/x b/x\n# one comment\n")


def test_the_prompt_is_read_only_when_the_answer_repeats_something() -> None:
    from daari.trust.degenerate import LazyPrompt

    reads: list[int] = []

    def source(prompt: str) -> LazyPrompt:
        return LazyPrompt(lambda: reads.append(1) or prompt)

    assert not runaway_repetition("A plain answer about rebasing three commits.", source("x"))
    assert reads == []
    loop = "the same line\n" * 6
    assert runaway_repetition(loop, source("what does this do")) is runaway_repetition(loop, "what does this do")
    assert runaway_repetition(loop, source(loop)) is runaway_repetition(loop, loop) is False  # copied material
    assert reads == [1, 1]
