"""An answer that asks the user's question back in other words (daari/trust/asked_back.py): a violation at every
tier, so a local tier's escalates and no tier's is cached; a real answer or a short clarifying question is not one.
Through a running daari with fake upstreams on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daari.eval.judge_set import parse_request
from daari.protocol.chat import Completion
from daari.trust.answer_check import answer_violations
from daari.trust.asked_back import asks_back, words
from evals.judge import judge_prompts as jp
from tests.judged_tiers import ask_twice
from tests.support import daari_meta

QUESTION = "How do I reverse a list in Python?"
ASKED_BACK = "How can I reverse a list in Python?"  # what the embedded Qwen2.5-Coder-0.5B answered, greedy


@pytest.mark.parametrize(("answer", "question"), [
    (ASKED_BACK, QUESTION),
    ("Can you explain the difference between a process and a thread in C++?",
     "What is the difference between a process and a thread?"),
    ("Can you explain how decorators work in Python?", "Explain what a Python decorator is."),
    ("Would you like me to fix the failing tests in parser.py?", "Fix the failing tests in parser.py"),
    ("  how do I REVERSE a list in python?  ", QUESTION),
])
def test_the_question_asked_back(answer: str, question: str) -> None:
    assert asks_back(answer, question)


@pytest.mark.parametrize(("answer", "question"), [
    ("Use reversed(items) or items.reverse().", QUESTION),  # an answer
    ("Which version of Python are you using?", QUESTION),  # a clarifying question: too few of its words
    ("Do you mean a shallow or a deep copy?", "How do I copy a dict in Python?"),
    ("Yes, 17 is a prime number.", "Is 17 a prime number?"),
    ("To reverse a list in Python? Use items[::-1].", QUESTION),  # two sentences: the question, then an answer
    ("How can I reverse a list in Python?\nUse items[::-1].", QUESTION),
    ("Why not?", "Why?"),  # a question of fewer than two words is not compared
])
def test_answers_and_clarifying_questions_are_not_asked_back(answer: str, question: str) -> None:
    assert not asks_back(answer, question)


def test_words_drop_what_a_question_is_asked_with_and_a_plurals_s() -> None:
    assert words("Can you explain how decorators work in Python?") == {"decorator", "work", "python"}
    assert words("What is the class of parser.py, and C++ or C#?") == {"class", "parser.py", "c++", "c#"}


def test_a_violation_of_a_long_form_answer_only() -> None:
    chat = parse_request(jp.openai([jp.user(QUESTION)], max_tokens=160))
    assert answer_violations(chat, Completion(text=ASKED_BACK)) == ("asks_back",)
    assert answer_violations(chat, Completion(text="Use items.reverse() to reverse it in place.")) == ()
    # A short form's copying is `copies_prompt`'s to judge: a title that is a question is a title.
    title = parse_request(jp.claude_title(jp.CONVERSATIONS["flaky-test"]))
    assert "asks_back" not in answer_violations(title, Completion(text="Why does test_upload_retries fail on CI?"))


def ask() -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": QUESTION}]}


async def test_a_local_tier_that_asks_back_escalates_and_the_answer_above_is_cached(tmp_path: Path) -> None:
    answer = "Use items.reverse() in place, or reversed(items) for a new iterator."
    asked = await ask_twice(tmp_path, "/v1/chat/completions", ask(), l3_reply=ASKED_BACK, l6_reply=answer)
    meta = daari_meta(asked.first)
    assert asked.first.json()["choices"][0]["message"]["content"] == answer
    assert (meta["tier"], meta["escalated_from"]) == ("L6", "L3")
    assert meta["attempts"][0]["violations"] == ["asks_back"]
    assert daari_meta(asked.second)["tier"] == "L0"  # the answer above was stored, and is what a repeat gets
    assert asked.second.json()["choices"][0]["message"]["content"] == answer
    assert asked.l6 is not None and len(asked.l3.requests) == len(asked.l6.requests) == 1


async def test_with_no_tier_above_it_is_served_with_the_warning_and_never_cached(tmp_path: Path) -> None:
    asked = await ask_twice(tmp_path, "/v1/chat/completions", ask(), l3_reply=ASKED_BACK)
    meta = daari_meta(asked.first)
    assert meta["tier"] == "L3" and meta["warning"] == "below_confidence_threshold"
    assert daari_meta(asked.second)["tier"] == "L3" and asked.second.headers.get("x-daari-cache") != "hit"
    assert len(asked.l3.requests) == 2  # asked again: not replayed from the cache
