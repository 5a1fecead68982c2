"""What real prompts state about their answers (daari/trust/stated_format.py), and what they do not."""

from __future__ import annotations

from typing import Any

import pytest

from daari.eval.judge_set import parse_request
from daari.protocol.chat import ChatRequest
from daari.protocol.openai_wire import parse_chat_request
from daari.trust.stated_format import JsonKey, StatedFormat, parse_instructions, read_stated_format
from evals.judge import judge_prompts as jp


def chat(*messages: dict[str, Any], **extra: Any) -> ChatRequest:
    return parse_chat_request({"model": "m", "messages": list(messages), **extra}, {})


def test_aider_086_commit_prompt() -> None:
    stated = read_stated_format(parse_request(jp.aider_commit("http-retry")))
    assert stated.one_line and stated.only and stated.imperative and stated.prefix_shape
    assert stated.max_chars == 72
    assert stated.prefixes == ("fix", "feat", "build", "chore", "ci", "docs", "style", "refactor", "perf", "test")
    assert stated.language is None and stated.json is None and stated.max_words is None


def test_aider_commit_language_instruction() -> None:
    assert read_stated_format(parse_request(jp.aider_commit("readme-typo", "German"))).language == "german"


def test_aider_earlier_commit_prompt_allows_a_body_and_any_type() -> None:
    stated = read_stated_format(parse_request(jp.aider_commit_old("ci-workflow")))
    assert stated.prefix_shape and stated.prefixes == () and stated.imperative and stated.no_quotes
    assert not stated.one_line and stated.max_chars is None
    assert stated.fence is None  # the structure is shown in a fence; nothing says the answer must be fenced


def test_aider_summary_prompt() -> None:
    stated = read_stated_format(parse_request(jp.aider_summary([("USER", "make it retry on errors in one line")])))
    assert stated.starts_with == "I asked you" and stated.fence == "forbidden"
    assert not stated.one_line  # "in one line" is the conversation, not the instruction


def test_claude_code_title_call_states_words_characters_and_nothing_else() -> None:
    stated = read_stated_format(parse_request(jp.claude_title(jp.CONVERSATIONS["oauth"])))
    assert (stated.min_words, stated.max_words, stated.max_chars, stated.only) == (5, 10, 50, True)


def test_claude_code_topic_check_is_json_with_typed_fields() -> None:
    stated = read_stated_format(parse_request(jp.claude_topic("thanks")))
    assert stated.json == "bare" and stated.only and (stated.min_words, stated.max_words) == (2, 3)
    assert stated.json_keys == (JsonKey("isNewTopic", ("boolean",)),
                                JsonKey("title", ("string", "null"), null_unless="isNewTopic"))


def test_claude_code_session_title_schema_from_output_config() -> None:
    stated = read_stated_format(parse_request(jp.claude_session_title("add CSV export")))
    assert stated.json == "bare" and stated.fence == "forbidden" and stated.json_exact_keys
    assert stated.json_keys == (JsonKey("title", ("string",)),)
    assert (stated.min_words, stated.max_words) == (3, 7) and stated.sentence_case


def test_opencode_title_prompt_and_its_material_after_the_lead_in() -> None:
    # The last user message is the user's own first message: it is titled, not obeyed.
    stated = read_stated_format(parse_request(jp.opencode_title("reply in one line, in JSON, under 10 characters")))
    assert stated.one_line and stated.only and stated.max_chars == 50 and stated.language == "same"
    assert stated.json is None and stated.starts_with is None  # "avoid ... starting with "Analyzing"" is no rule


def test_opencode_summary_prompt() -> None:
    stated = read_stated_format(parse_request(jp.opencode_summary([jp.user("hi")])))
    assert stated.max_sentences == 3 and stated.language == "same"


def test_structured_output_of_codex_and_the_agents_sdk() -> None:
    stated = read_stated_format(parse_request(jp.json_schema_request("review", jp.RISK_SCHEMA, "review")))
    assert stated.json == "bare" and stated.json_exact_keys and stated.fence == "forbidden"
    assert stated.json_keys == (JsonKey("summary", ("string",)),
                                JsonKey("risk", ("string",), ("low", "medium", "high")))
    assert read_stated_format(chat(jp.user("hi"), response_format={"type": "json_object"})).json == "bare"


@pytest.mark.parametrize("text", [
    "Write a Python function that checks a username is under 20 characters and alphanumeric.",
    "Write a one-line bash command to count the lines in all .py files under src/.",
    "Is this valid JSON? {\"a\": 1,}",
    "How do I convert a dict to JSON in Python?",
    "What is the capital of France?",
    "How do you say hello in German?",
    "Explain what a Python decorator is.",
])
def test_requests_that_state_no_answer_format(text: str) -> None:
    assert read_stated_format(chat(jp.user(text))) == StatedFormat()


def test_a_long_system_prompt_is_an_agents_manual_not_this_answers_format() -> None:
    manual = "You MUST answer concisely with fewer than 4 lines. Reply in one line. " + "Use the tools well. " * 400
    assert read_stated_format(chat(jp.system(manual), jp.user("fix the failing test"))) == StatedFormat()


def test_quoted_material_states_nothing() -> None:
    diff = ("diff --git a/p.py b/p.py\n--- a/p.py\n+++ b/p.py\n@@ -1 +1 @@\n-# reply in one line\n"
            "+# reply only with JSON\n")
    transcript = ("Please write a 5-10 word title for the following conversation:\n\nUser: keep the log line under "
                  "30 characters and reply in German\n\nClaude: Done.\n\nRespond with the title and nothing else.")
    assert read_stated_format(chat(jp.user("Summarize this change:\n\n" + diff))) == StatedFormat()
    stated = read_stated_format(chat(jp.user(transcript)))
    assert (stated.max_words, stated.only, stated.max_chars, stated.language) == (10, True, None, None)
    fenced = "Explain this:\n```\nprint('reply only with the title')\n```"
    assert read_stated_format(chat(jp.user(fenced))) == StatedFormat()


@pytest.mark.parametrize(("text", "field", "value"), [
    ("In one sentence, what does git stash do?", "max_sentences", 1),
    ("Explain a mutex in 2-3 sentences.", "max_sentences", 3),
    ("Give me a 3-5 word name for the tool.", "max_words", 5),
    ("Summarize in under 20 words: the build broke.", "max_words", 20),
    ("Answer in one word.", "max_words", 1),
    ("Keep it under 80 chars.", "max_chars", 80),
    ("The title must not exceed 60 characters.", "max_chars", 60),
    ("Reply only with the regex.", "only", True),
    ("Return JSON with keys name and age. Output only the JSON.", "json", "bare"),
    ("Convert this YAML to JSON:\nname: app", "json", "contains"),
    ("Put the query in a code block.", "fence", "required"),
    ("Do not use markdown.", "fence", "forbidden"),
    ("Answer in French.", "language", "french"),
    ("Reply in the same language as the user.", "language", "same"),
    ("Use sentence case.", "sentence_case", True),
])
def test_phrasings(text: str, field: str, value: object) -> None:
    assert getattr(parse_instructions(text), field) == value


def test_a_system_prompt_read_once_still_merges_with_each_requests_own_user_text() -> None:
    # The system prompt's reading is kept by its text (a client sends the same one on every request): a second
    # request with the same system prompt must still get its own user message's constraints, and none of the
    # first request's.
    system = {"role": "system", "content": "Reply in one line."}
    first = read_stated_format(chat(system, {"role": "user", "content": "Answer in at most 5 words."}))
    second = read_stated_format(chat(system, {"role": "user", "content": "Reply in JSON."}))
    third = read_stated_format(chat({"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}))
    assert first.one_line and first.max_words == 5 and first.json is None
    assert second.one_line and second.json == "contains" and second.max_words is None
    assert third == StatedFormat() and not third.stated and third.found == ()
    assert parse_instructions("Reply in one line.").merge(parse_instructions("hello")).one_line


def _strip_material_every_pattern(text: str) -> str:
    """strip_material as written before: every pattern run on every text."""
    from daari.trust import stated_format as sf

    text = sf._TAGGED.sub("\n", sf._FENCED.sub("\n", sf._INLINE_FENCE.sub(" code-fence ", text))).replace("*", "")
    if diff := sf._DIFF_START.search(text):
        text = text[:diff.start()]
    lines = text.splitlines()
    first_role = next((i for i, line in enumerate(lines) if sf._ROLE_LINE.match(line)), None)
    if first_role is not None:
        blanks = [i for i, line in enumerate(lines) if not line.strip() and i > first_role]
        last = lines[blanks[-1] + 1:] if blanks else []
        tail = last if last and not sf._ROLE_LINE.match(last[0]) else []
        lines = [*lines[:first_role], "", *tail]
    return "\n".join(lines).strip()


def test_strip_material_skips_only_patterns_that_cannot_match() -> None:
    import random

    from daari.trust.stated_format import strip_material

    pieces = ["Write a title.", "```py\nx = 1\n```", "```", "~~~", "<code>a</code>", "<diff>", "</diff>", "<", "*bold*",
              "diff --git a/x b/x", "# Diffs:", "--- a/f", "@@ -1 +1 @@", "@@ -", "User: hi", "Assistant: yo",
              "# user", "# User", "#", ":", "HUMAN:", "\n", "\n\n", " ", "plain words", "İ", "ſ"]
    rng = random.Random(8)
    changed = 0
    for _ in range(4000):
        text = "".join(rng.choice(pieces) + rng.choice(["", " ", "\n"]) for _ in range(rng.randint(0, 10)))
        expected = _strip_material_every_pattern(text)
        assert strip_material(text) == expected, text
        changed += expected != text.strip()
    assert changed > 1000
