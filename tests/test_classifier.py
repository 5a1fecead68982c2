"""The heuristic classifier: each rule, the rule order, size bands, agent turns and the golden prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daari.protocol.chat import ChatRequest, Message, Tool, ToolCall
from daari.routing.classifier import RULE_ORDER, RULE_OUTCOME, classify, last_user_text

GOLDEN = Path(__file__).resolve().parents[1] / "evals/routing/prompts.jsonl"


def ask(text: str, *, system: str | None = None) -> ChatRequest:
    messages = [Message("system", system)] if system else []
    return ChatRequest(messages=[*messages, Message("user", text)], model="m")


def rule(text: str) -> str:
    return classify(ask(text)).rule_id


def prose(tokens: int) -> str:
    """Plain English of about `tokens` estimated tokens, with no rule keywords in it."""
    sentence = "The team met on Monday and talked about the garden party plans for the summer. "
    return sentence * (tokens * 4 // len(sentence) + 1)


@pytest.mark.parametrize("text", [
    "hi", "Hello!", "hey there", "Thanks!", "thank you so much", "ok", "Got it, thanks.", "Good morning Claude",
    "What is the capital of Australia?", "who wrote Hamlet?", "Is it going to rain in Paris tomorrow?",
])
def test_trivial_chat_is_r_a1(text: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-A1", "chat", "L3")


@pytest.mark.parametrize("text", [
    "Convert this CSV to JSON:\na,b\n1,2",
    "Give me a regex for matching hex colours like #a0b1c2",
    "Sort these numbers: 5, 3, 9",
    "Extract the email addresses from: ann@example.org and bob@example.org",
    "Translate 'good night' to French",
    "Rename the keys of this object to snake_case: {\"firstName\": 1}",
    "Turn this into yaml: {\"a\": 1}",
    "Please format this as a markdown table: name age ann 3",
])
def test_transform_is_r_a2(text: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-A2", "transform", "L3")


@pytest.mark.parametrize("text", [
    "What does `x[::-1]` do?",
    "How do I reverse a list in Python?",
    "Why does my git push get rejected?",
    "Explain the difference between a list and a tuple in Python",
    "```python\nprint(sum(range(10)))\n```",
])
def test_code_explain_is_r_a3(text: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-A3", "code_explain", "L3")


@pytest.mark.parametrize("text", [
    "Implement a binary search in Go",
    "Write a function that parses ISO dates",
    "write me a Python class for a bank account",
    "Write unit tests for the parser",
    "Refactor this: ```def f(): pass```",
    "Can you fix this bug? The total is always zero.",
    "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nKeyError: 'user'",
    "TypeError: Cannot read properties of undefined (reading 'map')\n    at render (App.js:12:5)",
    "Hi! Please implement a LRU cache.",  # a greeting does not hide the real task
])
def test_code_work_is_r_a4(text: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-A4", "code_complex", "L4")


@pytest.mark.parametrize("text", [
    "Review the architecture of our billing system",
    "Explain this architecture decision: we chose event sourcing",  # explain is R-A3, R-A5 wins
    "Do a security audit of this login handler: ```def login(u, p): ...```",
    "Prove that the algorithm terminates",
    "Make the change across several files: rename the config loader",
    "Plan step by step how we migrate the system from MySQL to Postgres",
    "Design a distributed rate limiting service for our API",
])
def test_heavy_reasoning_is_r_a5(text: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling) == ("R-A5", "reasoning_heavy", "L6")


@pytest.mark.parametrize("text", [
    "git status",
    "Tell me a joke about penguins.",
    "Write a haiku about autumn leaves.",  # "write a" alone is not code work
    "Improve the wording of my cover letter opening: I am writing to apply.",  # "improve" is not "prove"
])
def test_anything_else_is_the_default_rule(text: str) -> None:
    result = classify(ask(text))
    assert (result.rule_id, result.task_type, result.ceiling, result.ambiguous) == ("R-A0", "general", "L3", False)


def test_large_context_is_r_a5_whatever_the_words() -> None:
    result = classify(ask("Thanks! " + prose(4100)))
    assert result.tokens > 4000
    assert result.rule_id == "R-A5"


def test_code_in_a_mid_sized_request_is_r_a4_but_small_code_is_r_a3() -> None:
    small_code = "```python\nx = compute(1)\n```\n"
    assert rule(small_code) == "R-A3"
    mid = classify(ask(small_code + prose(1000)))
    assert 800 <= mid.tokens <= 4000
    assert mid.rule_id == "R-A4"


def test_transform_needs_a_small_input() -> None:
    assert rule("Convert this list to JSON: " + prose(100)) == "R-A2"
    assert rule("Convert this list to JSON: " + prose(900)) == "R-A0"


def test_short_question_counts_the_last_message_not_the_system_prompt() -> None:
    request = ask("What is the capital of Peru?", system=prose(150))
    assert classify(request).rule_id == "R-A1"
    assert rule("What is the capital of Peru, and could you also tell me about its history, its "
                "climate, its food, the main sights for visitors, and the best season to go there?") == "R-A0"


def test_keywords_in_the_system_prompt_or_earlier_turns_do_not_count() -> None:
    request = ChatRequest(model="m", messages=[
        Message("system", "You help with architecture reviews and refactoring."),
        Message("user", "Implement a parser"),
        Message("assistant", "Done."),
        Message("user", "thanks!"),
    ])
    assert classify(request).rule_id == "R-A1"


def test_ambiguous_only_for_the_default_rule_in_its_size_band() -> None:
    assert classify(ask(prose(150))).ambiguous is False
    mid = classify(ask(prose(400)))
    assert (mid.rule_id, mid.ambiguous) == ("R-A0", True)
    assert classify(ask(prose(850))).ambiguous is False
    keyworded = classify(ask("Convert this to JSON: " + prose(400)))
    assert (keyworded.rule_id, keyworded.ambiguous) == ("R-A2", False)


def test_word_boundaries_avoid_false_positives() -> None:
    assert rule("Proofread my email: see you tomorrow at noon, Anna") == "R-A0"
    assert rule("What sorting hat house am I in?") == "R-A1"  # "sorting" is not "sort"
    assert rule("Is the debugger in VS Code free?") == "R-A1"  # "debugger" is not "debug"


def test_agent_turn_routes_on_the_last_user_message() -> None:
    request = ChatRequest(
        model="m",
        tools=[Tool("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})],
        messages=[
            Message("user", "Refactor utils.py to remove duplication"),
            Message("assistant", None, tool_calls=[ToolCall("c1", "read_file", '{"path": "utils.py"}')]),
            Message("tool", "def a(): pass", tool_call_id="c1"),
        ],
    )
    assert last_user_text(request) == "Refactor utils.py to remove duplication"
    assert classify(request).rule_id == "R-A4"


def test_no_user_message_is_the_default_rule() -> None:
    assert classify(ChatRequest(model="m", messages=[Message("system", "be brief")])).rule_id == "R-A0"


def test_rule_table_is_complete() -> None:
    assert set(RULE_ORDER) | {"R-A0"} == set(RULE_OUTCOME)
    assert RULE_ORDER[0] == "R-A5"  # the documented order: most demanding first


def _request(prompt: dict) -> ChatRequest:
    messages = []
    for m in prompt["messages"]:
        calls = [ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                 for c in m.get("tool_calls") or []]
        messages.append(Message(m["role"], m.get("content"), tool_calls=calls, tool_call_id=m.get("tool_call_id")))
    tools = [Tool(t["function"]["name"], t["function"].get("description"), t["function"]["parameters"])
             for t in prompt.get("tools") or []]
    return ChatRequest(messages=messages, model="daari", tools=tools)


@pytest.mark.parametrize("prompt", [json.loads(line) for line in GOLDEN.read_text().splitlines()],
                         ids=lambda p: p["id"])
def test_golden_prompts_classify_as_documented(prompt: dict) -> None:
    result = classify(_request(prompt))
    assert (result.rule_id, result.task_type) == (prompt["rule_id"], prompt["task_type"])
