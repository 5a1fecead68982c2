"""Three stated-format rules (issue 19): "one per line" lists, a summary that must keep the question the
conversation ends on, and a title in a Romance language told from an English one by its word endings. Examples
written for these tests, not rows of evals/judge (daari/trust/stated_format.py, format_check.py, language.py,
closing_question.py)."""

from __future__ import annotations

from typing import Any

import pytest

from daari.eval.judge_set import parse_request
from daari.protocol.chat import ChatRequest, Completion
from daari.protocol.openai_wire import parse_chat_request
from daari.trust.answer_check import answer_violations
from daari.trust.closing_question import closing_question, question_kept
from daari.trust.format_check import format_violations
from daari.trust.language import breaks_language
from daari.trust.stated_format import parse_instructions, read_stated_format
from evals.judge import judge_prompts as jp


def chat(*messages: dict[str, Any]) -> ChatRequest:
    return parse_chat_request({"model": "m", "messages": list(messages)}, {})


@pytest.mark.parametrize(("text", "per_line", "min_lines"), [
    ("Name four Python web frameworks, one per line.", True, 4),
    ("Give me 5 branch names, each on its own line.", True, 5),
    ("Suggest three test names, one name per line, nothing else.", True, 3),
    ("Print the changed files on separate lines.", True, None),
    ("List two of them, one per line.", True, None),  # "two of them": a count of something else
    ("Write a one-line summary of each module, one per line.", True, None),
    ("Explain the change in one line.", False, None),
    ("List three HTTP status codes for client errors.", False, None),
])
def test_one_per_line_and_the_item_count(text: str, per_line: bool, min_lines: int | None) -> None:
    stated = parse_instructions(text)
    assert (stated.per_line, stated.min_lines) == (per_line, min_lines)


def test_one_line_of_each_item_is_not_a_one_line_answer() -> None:
    stated = parse_instructions("Write a one-line summary of each module, one per line.")
    assert not stated.one_line
    assert format_violations("cli: parses flags\nio: reads files", stated) == ()
    assert parse_instructions("Explain the change in one line.").one_line


@pytest.mark.parametrize(("answer", "expected"), [
    ("Django\nFlask\nFastAPI\nPyramid", ()),
    ("- Django\n- Flask\n- FastAPI\n- Pyramid", ()),
    ("```\nDjango\nFlask\nFastAPI\nPyramid\n```", ()),  # the fence lines are not items
    ("Django, Flask, FastAPI, Pyramid", ("per_line",)),
    ("Django\nFlask, FastAPI, Pyramid", ("per_line",)),
    ("```\nDjango, Flask\nFastAPI\n```", ("per_line",)),
])
def test_a_counted_list_needs_a_line_per_item(answer: str, expected: tuple[str, ...]) -> None:
    assert format_violations(answer, parse_instructions("Name four Python web frameworks, one per line.")) == expected


@pytest.mark.parametrize(("answer", "expected"), [
    ("src/app.py\nsrc/db.py", ()),
    ("src/app.py", ()),  # one file changed: one line is right
    ("src/app.py, src/db.py", ("per_line",)),
    ("src/app.py; src/db.py", ("per_line",)),
])
def test_an_uncounted_list_on_one_line_breaks_it(answer: str, expected: tuple[str, ...]) -> None:
    assert format_violations(answer, parse_instructions("Print the changed files on separate lines.")) == expected


SUMMARY_RULES = ("Summarize this session for the changelog, at most 3 sentences.\n"
                 "- If the conversation ends with an open question to the user, keep that exact question.")
ASKED = "Should I also update the three call sites in cli.py?"


def summary(*turns: dict[str, Any]) -> ChatRequest:
    return chat(jp.system(SUMMARY_RULES), jp.user("rename load_cfg to load_config"), *turns,
                jp.user("Summarize the session."))


def test_the_prompt_says_to_keep_the_closing_question() -> None:
    assert read_stated_format(summary()).keeps_question
    for text in ("Preserve the final question verbatim.", "If it ends with a question, include that question."):
        assert parse_instructions(text).keeps_question, text
    assert not parse_instructions("Answer the user's question.").keeps_question
    assert not parse_instructions("Never ask questions.").keeps_question


def test_the_question_the_conversation_ends_on() -> None:
    asked = summary(jp.assistant(f"I renamed load_cfg to load_config in settings.py. {ASKED}"))
    assert closing_question(asked) == ASKED
    assert closing_question(summary(jp.assistant("I renamed load_cfg to load_config. Done."))) is None
    answered = chat(jp.system(SUMMARY_RULES), jp.user("rename it"), jp.assistant(f"Done. {ASKED}"), jp.user("yes"),
                    jp.user("Summarize the session."))
    assert closing_question(answered) is None  # the user answered it: nothing open to keep


@pytest.mark.parametrize(("answer", "expected"), [
    (f"I renamed load_cfg to load_config in settings.py. {ASKED}", ()),
    ("I renamed load_cfg to load_config in settings.py. Should I also update the 3 call sites in cli.py?", ()),
    ("I renamed load_cfg to load_config in settings.py and updated the call sites in cli.py.", ("question_dropped",)),
    ("I renamed load_cfg to load_config in settings.py. Next: the call sites in cli.py?", ("question_dropped",)),
])
def test_a_summary_keeps_the_question_it_was_told_to_keep(answer: str, expected: tuple[str, ...]) -> None:
    request = summary(jp.assistant(f"I renamed load_cfg to load_config in settings.py. {ASKED}"))
    assert answer_violations(request, Completion(text=answer)) == expected


def test_no_closing_question_nothing_to_keep() -> None:
    request = summary(jp.assistant("I renamed load_cfg to load_config in settings.py."))
    assert answer_violations(request, Completion(text="I renamed load_cfg to load_config in settings.py.")) == ()
    assert question_kept("Should we ship it today?", "should we ship it today?")
    assert not question_kept("We should ship it today.", "Should we ship it today?")  # no longer asked


PORTUGUESE = "Preciso fazer a migração das tabelas do banco no Django, como faço isso?"
FRENCH = "Comment est-ce que je peux améliorer la sécurité de mon API avec Express ?"
TITLE = read_stated_format(parse_request(jp.opencode_title("x")))  # "the same language as the user message"


@pytest.mark.parametrize(("user", "answer", "expected"), [
    ("¿Cómo configuro la paginación en mi endpoint de Flask?", "Flask Endpoint Pagination Configuration",
     ("language",)),
    ("¿Cómo configuro la paginación en mi endpoint de Flask?", "Configuración de paginación en Flask", ()),
    ("¿Cómo configuro la paginación en mi endpoint de Flask?", "Paginación endpoint Flask", ()),
    ("Come posso gestire le dipendenze del mio progetto Python?", "Python Dependency Management", ("language",)),
    ("Come posso gestire le dipendenze del mio progetto Python?", "Gestione dipendenze progetto Python", ()),
    (PORTUGUESE, "Django Database Migration", ("language",)),
    (PORTUGUESE, "Migração banco dados Django", ()),
    (FRENCH, "Express API Security Hardening", ("language",)),
    (FRENCH, "Sécurité API Express", ()),
    ("Wie kann ich die Performance meiner Datenbank verbessern?", "Datenbank Performance Optimierung", ()),
])
def test_a_title_in_english_where_a_romance_language_was_asked(user: str, answer: str,
                                                               expected: tuple[str, ...]) -> None:
    assert format_violations(answer, TITLE, user) == expected


def test_endings_only_count_where_the_language_does_not_share_them() -> None:
    assert breaks_language("Kubernetes Deployment Automation", "spanish")
    assert not breaks_language("Kubernetes Deployment Automation", "german")  # -tion, -ment are German too
    assert not breaks_language("Kubernetes Deployment Automation", "english")
    assert not breaks_language("JWT Express", "spanish")  # too little to tell
