"""The classifier: the spec's R-A1..R-A5 and their thresholds, the project's R-P*/R-C* rules, agent turns,
the ambiguity band and the golden prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daari.eval.requests import to_request
from daari.protocol.chat import ChatRequest, Message, Tool, ToolCall
from daari.routing.classifier import RULE_ORDER, RULE_OUTCOME, classify, last_user_text
from daari.task_types import MODEL_TASK_TYPES

EVALS = Path(__file__).resolve().parents[1] / "evals/routing"


def ask(text: str, *, system: str | None = None, max_tokens: int | None = None) -> ChatRequest:
    messages = [Message("system", system)] if system else []
    sampling = {"max_tokens": max_tokens} if max_tokens is not None else {}
    return ChatRequest(messages=[*messages, Message("user", text)], model="m", sampling=sampling)


def rule(text: str, **kw: object) -> str:
    return classify(ask(text, **kw)).rule_id  # type: ignore[arg-type]


def prose(tokens: int) -> str:
    """Plain English of about `tokens` estimated tokens, with no rule keywords in it."""
    sentence = "The team met on Monday and talked about the garden party plans for the summer. "
    return sentence * (tokens * 4 // len(sentence) + 1)


@pytest.mark.parametrize("text", [
    "Is this a test file? yes or no", "Classify: 'refund not received'", "True or false: 2 is prime",
    "Which type of error is ValueError?", "Is it safe to delete node_modules?",
])
def test_r_a1_tiny_classification(text: str) -> None:
    result = classify(ask(text))
    assert result.tokens < 50
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-A1", "classify", "L3")


def test_r_a1_needs_fewer_than_50_tokens() -> None:
    assert rule("Is this a test file? " + "x = 1\n" * 60) == "R-A3"  # the spec's GP-02 shape: 20 lines


@pytest.mark.parametrize(("text", "task_type"), [
    ("Format as JSON: {foo: 1}", "transform"),
    ("Convert this YAML to JSON:\na: 1\nb: [2, 3]", "transform"),
    ("Reformat this date: 2026/11/30", "transform"),
    ("Extract the email addresses from: ann@example.org and bob@example.org", "extract"),
    ("Parse this query string: a=1&b=2", "extract"),
    ("Sort these numbers: 5, 3, 9", "transform"),
])
def test_r_a2_small_transform_or_extract(text: str, task_type: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-A2", task_type, "L3")


def test_r_a2_needs_fewer_than_200_tokens() -> None:
    assert rule("Convert this list to JSON: " + prose(100)) == "R-A2"
    assert rule("Convert this list to JSON: " + prose(300)) == "R-A3"


@pytest.mark.parametrize(("tokens", "expected"), [
    (100, ("R-A3", "generate_small", "L3")), (490, ("R-A3", "generate_small", "L3")),
    (520, ("R-A4", "generate_small", "L4")), (1980, ("R-A4", "generate_small", "L4")),
    (2010, ("R-A5", "generate_large", "L6")), (9000, ("R-A5", "generate_large", "L6")),
])
def test_size_buckets_r_a3_r_a4_r_a5(tokens: int, expected: tuple[str, str, str]) -> None:
    sentence = "word " * (tokens * 4 // 5 - 3)  # estimate: (chars + 3) // 4 + 4 framing
    result = classify(ChatRequest(messages=[Message("user", sentence)], model="m"))
    assert abs(result.tokens - tokens) <= 3
    assert (result.rule_id, result.task_type, result.ceiling) == expected


def test_size_counts_the_whole_request_not_the_last_message() -> None:
    request = ask("Is this ok?", system=prose(2100))
    assert classify(request).rule_id == "R-A5"


@pytest.mark.parametrize("text", [
    "Explain microservices vs monolith in at least 500 words",
    "Review the architecture of our billing system",
    "Do a security audit of this login handler: ```def login(u, p): ...```",
    "Plan step by step how we migrate the system from MySQL to Postgres",
    "Make the change across several files: rename the config loader",
])
def test_r_p1_long_reasoning_goes_to_l6(text: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-P1", "generate_large", "L6")


@pytest.mark.parametrize("text", [
    "Implement a binary search in Go", "Write a function that parses ISO dates",
    "Generate unit tests for Calculator", "Refactor this: ```def f(): pass```",
    "Can you fix this bug? The total is always zero.", "Add tests for the parser",
])
def test_r_p2_code_work_goes_to_l4(text: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-P2", "generate_small", "L4")


@pytest.mark.parametrize("text", [
    "Add a docstring to this function: def f(): pass",
    "Write a docstring for this function", "Write a haiku about autumn leaves.",
    "Is the debugger in VS Code free?", "Summarize this log:\nValueError: bad input",
])
def test_words_near_code_work_are_not_code_work(text: str) -> None:
    assert rule(text) not in ("R-P2", "R-P1")


def test_side_calls_are_r_c1_cheapest_and_only_probes_never_escalate() -> None:
    probe = classify(ask("quota", max_tokens=1))
    title = classify(ask("<session>user: fix the login bug</session>",
                         system="Write a short sentence-case title (3-7 words) for this coding session."))
    topic = classify(ask("now the payment tests", system='Reply {"isNewTopic": bool, "title": str}.'))
    assert (probe.rule_id, probe.ceiling, probe.escalate) == ("R-C1", "L3", False)  # nobody reads its answer
    for result in (title, topic):  # a title that fails the judge is worth a second tier (issue 19)
        assert (result.rule_id, result.ceiling, result.escalate) == ("R-C1", "L3", True)
    big_system = classify(ask("hi", system="Give a 3-5 word title. " + prose(1200)))
    assert big_system.rule_id != "R-C1"  # a long system prompt is a main turn, not a side call


def test_edit_format_requests_are_r_c2_at_least_l4() -> None:
    system = "Describe each change with a *SEARCH/REPLACE block*:\n<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE"
    result = classify(ask("Add a --verbose flag", system=system))
    assert (result.rule_id, result.ceiling) == ("R-C2", "L4")
    assert classify(ask("Add a --verbose flag", system=system + prose(2500))).ceiling == "L6"


def test_xml_tool_agents_are_r_c3_agent_turns() -> None:
    system = ("TOOL USE\nTool uses are formatted using XML-style tags.\n"
              "<read_file>\n<path>a.ts</path>\n</read_file>\n<attempt_completion><result>x</result></attempt_completion>")
    result = classify(ask("<task>add validation</task>", system=system))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-C3", "agent_turn", "L4")


def test_agent_turns_take_the_size_rules_only() -> None:
    tools = [Tool("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})]
    request = ChatRequest(model="m", tools=tools, messages=[
        Message("user", "Refactor utils.py to remove duplication"),
        Message("assistant", None, tool_calls=[ToolCall("c1", "read_file", '{"path": "utils.py"}')]),
        Message("tool", "def a(): pass", tool_call_id="c1"),
    ])
    assert last_user_text(request) == "Refactor utils.py to remove duplication"
    result = classify(request)
    # ADR-0004: routed to L3 (not R-P2's L4); a large agent request goes where it fits.
    assert (result.rule_id, result.task_type, result.ceiling, result.ambiguous) == ("R-A3", "agent_turn", "L3", False)
    request.messages.insert(0, Message("system", prose(2100)))
    assert classify(request).ceiling == "L6"


def test_ambiguous_is_a_default_rule_in_the_band() -> None:
    assert classify(ask(prose(150))).ambiguous is False
    mid = classify(ask(prose(400)))
    assert (mid.rule_id, mid.ambiguous) == ("R-A3", True)
    assert classify(ask(prose(700))).ambiguous is True  # R-A4 is a default rule too
    assert classify(ask(prose(850))).ambiguous is False
    keyworded = classify(ask("Refactor this: " + prose(400)))
    assert (keyworded.rule_id, keyworded.ambiguous) == ("R-P2", False)


def test_no_user_message_is_a_size_rule() -> None:
    assert classify(ChatRequest(model="m", messages=[Message("system", "be brief")])).rule_id == "R-A3"


def test_rule_table_is_complete() -> None:
    assert set(RULE_ORDER) >= {"R-A1", "R-A2", "R-A3", "R-A4", "R-A5"}
    assert {task for task, _ in RULE_OUTCOME.values()} <= set(MODEL_TASK_TYPES)


def _golden() -> list[dict]:
    return [json.loads(line) for f in ("prompts.jsonl", "project_prompts.jsonl")
            for line in (EVALS / f).read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("prompt", _golden(), ids=lambda p: p["id"])
def test_golden_prompts_classify_as_documented(prompt: dict) -> None:
    result = classify(to_request(prompt))
    assert (result.rule_id, result.task_type) == (prompt["rule_id"], prompt["task_type"])


EDIT_FORMAT_SAMPLES = [
    "<<<<<<< SEARCH", "<<<<<<< search", "<<<<<< SEARCH", ">>>>>>> Replace", "use SEARCH/REPLACE  blocks.",
    "a search/replace block", "xsearch/replace blocks", "Return a unified diff, like `diff -U0` does",
    "unified   diff then\ndiff -U0", "*added these files to the chat*", "*Added These\nFiles to the chat*",
    "Output a copy of each file that needs changes", "output a copy of each file that needs changing",
    "ſearch/replace blocks", "<<<<<<< ſEARCH", "Output a copy of each file that needs changeſ",
    "İ unified diff -U0", "unıfied diff then diff -U0",
    "Outputs — a copy of each file that needs changes", "Output a copy of each file that needs changes — and more",
    "plain prose with output, copy, each, needs and changes in it", "",
]


@pytest.mark.parametrize("text", EDIT_FORMAT_SAMPLES)
def test_the_edit_format_prefilter_agrees_with_the_regex(text: str) -> None:
    from daari.routing.client_shapes import EDIT_FORMAT, asks_edit_format

    assert asks_edit_format(text) == (EDIT_FORMAT.search(text) is not None)


@given(st.lists(st.sampled_from(["<<<<<<<", ">>>>>>>", " ", "\n", "SEARCH", "search", "/REPLACE", "replace", "blocks",
                                 "unified", "diff", "-U0", "-u0", "*added", "these", "files", "to", "the", "chat*",
                                 "Output", "a", "copy", "of", "each", "file", "that", "needs", "changes", "ſ", "K",
                                 "İ", "ı", "x", "é", "—"]), max_size=40))
def test_the_edit_format_prefilter_agrees_with_the_regex_on_any_text(words: list[str]) -> None:
    from daari.routing.client_shapes import EDIT_FORMAT, asks_edit_format

    for text in ("".join(words), " ".join(words)):
        assert asks_edit_format(text) == (EDIT_FORMAT.search(text) is not None)
