"""An answer that asks the user's question back in other words (daari/trust/asked_back.py): a violation at every
tier, so a local tier's escalates and no tier's is cached; a real answer or a short clarifying question is not one.
Through a running daari with fake upstreams on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from daari.eval.judge_set import parse_request
from daari.protocol.chat import Completion
from daari.trust.answer_check import answer_violations
from daari.trust.asked_back import asks_back, words
from evals.judge import judge_prompts as jp
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

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


def meta_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    meta: dict[str, Any] = response.json()["daari_meta"]
    return meta


def ask() -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": QUESTION}]}


async def test_a_local_tier_that_asks_back_escalates_and_the_answer_above_is_cached(tmp_path: Path) -> None:
    l3, l6 = FakeOpenAI(), FakeOpenAI()
    l3.reply, l6.reply = ASKED_BACK, "Use items.reverse() in place, or reversed(items) for a new iterator."
    async with serve_app(l3) as u3, serve_app(l6) as u6:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1"),
                                              "L6": upstream_tier("openai", u6 + "/v1")}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            first = await client.post("/v1/chat/completions", json=ask())
            second = await client.post("/v1/chat/completions", json=ask())
    meta = meta_of(first)
    assert first.json()["choices"][0]["message"]["content"] == l6.reply
    assert (meta["tier"], meta["escalated_from"]) == ("L6", "L3")
    assert meta["attempts"][0]["violations"] == ["asks_back"]
    assert meta_of(second)["tier"] == "L0" and second.json()["choices"][0]["message"]["content"] == l6.reply
    assert len(l3.requests) == len(l6.requests) == 1


async def test_with_no_tier_above_it_is_served_with_the_warning_and_never_cached(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    l3.reply = ASKED_BACK
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            first = await client.post("/v1/chat/completions", json=ask())
            second = await client.post("/v1/chat/completions", json=ask())
    meta = meta_of(first)
    assert meta["tier"] == "L3" and meta["warning"] == "below_confidence_threshold"
    assert meta_of(second)["tier"] == "L3" and second.headers.get("x-daari-cache") != "hit"
    assert len(l3.requests) == 2  # asked again: not replayed from the cache
