"""Round trips through the neutral form, one table of cases.

Requests: Anthropic body -> neutral -> OpenAI upstream body -> neutral again, and -> Anthropic body (no raw)
-> neutral again. Answers: Completion -> Anthropic message / Anthropic stream -> decoded -> Completion.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from daari.protocol import openai_wire
from daari.protocol.anthropic_render import (
    AnthropicEventDecoder,
    AnthropicStreamRenderer,
    events_from_message,
    render_message,
)
from daari.protocol.anthropic_wire import parse_messages_request, to_upstream_body
from daari.protocol.chat import ChatRequest, Completion, Message, ToolCall, Usage
from daari.protocol.events import assemble, replay
from daari.protocol.sse import SSEDecoder


@dataclass(frozen=True)
class Case:
    name: str
    messages: list[dict[str, Any]]
    completion: Completion


CASES = [
    Case(
        "text",
        [{"role": "user", "content": "Say hi."},
         {"role": "assistant", "content": "Hi!"},
         {"role": "user", "content": [{"type": "text", "text": "Again, please."}]}],
        Completion(text="Hi again, friend.", usage=Usage(10, 5)),
    ),
    Case(
        "parallel tool calls",
        [{"role": "user", "content": "Weather in Paris and Rome?"},
         {"role": "assistant", "content": [
             {"type": "text", "text": "Checking both."},
             {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
             {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Rome"}}]},
         {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_a", "content": "18C"},
             {"type": "tool_result", "tool_use_id": "toolu_b",
              "content": [{"type": "text", "text": "24C"}]}]}],
        Completion(text="", finish_reason="tool_calls", usage=Usage(30, 12), tool_calls=[
            ToolCall("toolu_c", "get_weather", '{"city":"Oslo","unit":"C"}'),
            ToolCall("toolu_d", "get_time", '{"zone":"Europe/Oslo"}')]),
    ),
    Case(
        "empty tool input",
        [{"role": "user", "content": "List files."},
         {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_e", "name": "ls", "input": {}}]},
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_e", "content": ""}]}],
        Completion(text="Listing.", finish_reason="tool_calls", tool_calls=[ToolCall("toolu_f", "ls", "")],
                   usage=Usage(20, 3)),
    ),
    Case(
        "unicode",
        [{"role": "user", "content": "Traduis « bonjour » en 日本語 🙂"},
         {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_u", "name": "translate",
              "input": {"text": "bonjour ✓", "to": "ja"}}]},
         {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_u", "content": "こんにちは"}]}],
        Completion(text="こんにちは 🙂 — «voilà»", finish_reason="tool_calls", usage=Usage(50, 9),
                   tool_calls=[ToolCall("toolu_v", "say", '{"text":"ça va ✓"}')]),
    ),
    Case(
        "tool_result error",
        [{"role": "user", "content": "Read /etc/shadow"},
         {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_r", "name": "Read", "input": {"path": "/etc/shadow"}}]},
         {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_r", "is_error": True,
              "content": "permission denied"},
             {"type": "text", "text": "Then stop."}]}],
        Completion(text="Stopping.", stop_sequence="END", finish_reason="stop_sequence", usage=Usage(41, 2)),
    ),
]
IDS = [case.name for case in CASES]


def anthropic_request(case: Case) -> ChatRequest:
    body = {"model": "claude-x", "max_tokens": 256, "system": "You are terse.", "messages": case.messages,
            "tools": [{"name": n, "input_schema": {"type": "object"}}
                      for n in ("get_weather", "get_time", "ls", "translate", "say", "Read")]}
    return parse_messages_request(body, {})


def shape(messages: list[Message]) -> list[tuple[Any, ...]]:
    """What a message means: role, text, tool calls (arguments as objects), the call it answers."""
    return [(m.role, m.text(), [(c.id, c.name, json.loads(c.arguments or "{}")) for c in m.tool_calls],
             m.tool_call_id, m.is_error) for m in messages]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_anthropic_request_through_openai_and_back(case: Case) -> None:
    request = anthropic_request(case)
    body = json.loads(json.dumps(openai_wire.to_upstream_body(request, "gpt-x", stream=False)))
    again = openai_wire.parse_chat_request(body, {})
    expected = [
        # OpenAI tool messages have no error flag: the error rides in the text (openai_wire's choice)
        (role, openai_wire.TOOL_ERROR_PREFIX + text if is_error else text, calls, call_id, False)
        for role, text, calls, call_id, is_error in shape(request.messages)
    ]
    assert shape(again.messages) == expected
    assert again.sampling["max_tokens"] == 256
    assert [t.name for t in again.tools] == [t.name for t in request.tools]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_anthropic_request_rebuilt_without_raw_means_the_same(case: Case) -> None:
    request = anthropic_request(case)
    request.raw = {}
    body = json.loads(json.dumps(to_upstream_body(request, None, stream=False)))
    again = parse_messages_request(body, {})
    assert shape(again.messages) == shape(request.messages)
    assert again.sampling == request.sampling
    assert again.tools == request.tools


def canonical(completion: Completion) -> Completion:
    """Anthropic carries tool input as an object: arguments come back as compact JSON, "" as "{}"."""
    calls = [ToolCall(c.id, c.name, json.dumps(json.loads(c.arguments or "{}"), separators=(",", ":"),
                                               ensure_ascii=False)) for c in completion.tool_calls]
    return Completion(text=completion.text, tool_calls=calls, finish_reason=completion.finish_reason,
                      stop_sequence=completion.stop_sequence, usage=completion.usage, model="")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_completion_through_an_anthropic_message(case: Case) -> None:
    request = anthropic_request(case)
    body = json.loads(json.dumps(render_message(case.completion, request, {}, "msg_1")))
    again = assemble(events_from_message(body))
    assert canonical(again) == canonical(case.completion)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_completion_through_an_anthropic_stream(case: Case) -> None:
    request = anthropic_request(case)
    renderer = AnthropicStreamRenderer(request, "msg_1")
    chunks = renderer.start()
    for event in replay(case.completion):
        chunks.extend(renderer.event(event))
    chunks.extend(renderer.finish({}))
    decoder = AnthropicEventDecoder()
    events = [e for item in SSEDecoder().feed(b"".join(chunks)) for e in decoder.feed(item.event or "",
                                                                                        json.loads(item.data))]
    again = assemble(events)
    assert decoder.finished
    assert canonical(again) == canonical(case.completion)


def test_forced_tool_choice_survives_both_directions() -> None:
    from daari.protocol import anthropic_wire, openai_wire

    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    forced = {"type": "function", "function": {"name": "f"}}
    from_openai = openai_wire.parse_chat_request(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": tools, "tool_choice": forced}, {})
    from_anthropic = anthropic_wire.parse_messages_request(
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
         "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "f"}},
        {})
    for request in (from_openai, from_anthropic):
        assert request.sampling["tool_choice"] == {"name": "f"}
        assert openai_wire.to_upstream_body(request, None, False)["tool_choice"] == forced
        assert anthropic_wire.to_upstream_body(request, None, False)["tool_choice"] == {"type": "tool", "name": "f"}
    # Anthropic-only parameters never reach an OpenAI upstream.
    thinking = anthropic_wire.parse_messages_request(
        {"model": "m", "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}, "top_k": 5,
         "messages": [{"role": "user", "content": "x"}]}, {})
    body = openai_wire.to_upstream_body(thinking, None, False)
    assert "thinking" not in body and "top_k" not in body
