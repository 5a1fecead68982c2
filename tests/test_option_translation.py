"""Options with an equivalent in the other protocol (reasoning effort <-> thinking budget, strict tools):
translated only for tiers with translate_options, since many models refuse them."""

from __future__ import annotations

from typing import Any

import pytest

from daari.protocol import anthropic_wire, openai_wire

STRICT_TOOL = {"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "object"}}}


def openai_request(**fields: Any) -> Any:
    return openai_wire.parse_chat_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}, {})


def anthropic_request(**fields: Any) -> Any:
    return anthropic_wire.parse_messages_request(
        {"model": "m", "max_tokens": 8000, "messages": [{"role": "user", "content": "hi"}], **fields}, {})


@pytest.mark.parametrize(("effort", "budget"), [("low", 1024), ("medium", 4096), ("high", 7999)])
def test_reasoning_effort_becomes_a_thinking_budget(effort: str, budget: int) -> None:
    request = openai_request(reasoning_effort=effort, temperature=0.3, max_tokens=8000, tools=[STRICT_TOOL])
    body = anthropic_wire.to_upstream_body(request, None, False, translate_options=True)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}  # always below max_tokens
    assert "temperature" not in body  # thinking admits none other than 1
    assert body["tools"][0]["strict"] is True
    plain = anthropic_wire.to_upstream_body(request, None, False)
    assert "thinking" not in plain and "strict" not in plain["tools"][0] and plain["temperature"] == 0.3


def test_too_small_an_answer_budget_gets_no_thinking() -> None:
    body = anthropic_wire.to_upstream_body(openai_request(reasoning_effort="high", max_tokens=500), None, False,
                                           translate_options=True)
    assert "thinking" not in body


@pytest.mark.parametrize(("fields", "effort"), [
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "low"),
    ({"thinking": {"type": "enabled", "budget_tokens": 6000}}, "medium"),
    ({"thinking": {"type": "enabled", "budget_tokens": 31999}}, "high"),
    ({"output_config": {"effort": "medium"}, "thinking": {"type": "adaptive"}}, "medium"),
    ({"output_config": {"effort": "max"}}, "high"),
])
def test_thinking_and_effort_become_reasoning_effort(fields: dict[str, Any], effort: str) -> None:
    tool = {"name": "f", "input_schema": {"type": "object"}, "strict": True}
    request = anthropic_request(tools=[tool], **fields)
    body = openai_wire.to_upstream_body(request, None, False, translate_options=True)
    assert body["reasoning_effort"] == effort
    assert body["tools"][0]["function"]["strict"] is True
    plain = openai_wire.to_upstream_body(request, None, False)
    assert "reasoning_effort" not in plain and "strict" not in plain["tools"][0]["function"]


def test_unknown_parts_translate_where_there_is_an_equivalent() -> None:
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}
    request = anthropic_request(messages=[{"role": "user", "content": [{"type": "text", "text": "read"}, pdf]}])
    body = openai_wire.to_upstream_body(request, None, False)
    assert body["messages"][0]["content"][1] == {
        "type": "file", "file": {"filename": "document", "file_data": "data:application/pdf;base64,JVBE"}}
    odd = anthropic_request(messages=[{"role": "user", "content": [{"type": "text", "text": "x"},
                                                                   {"type": "block_from_2031"}]}])
    with pytest.raises(openai_wire.InvalidRequest, match="block_from_2031"):
        openai_wire.to_upstream_body(odd, None, False)


def test_openai_parts_for_an_anthropic_tier() -> None:
    pdf = {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"}}
    request = openai_request(messages=[{"role": "user", "content": [{"type": "text", "text": "read"}, pdf]}])
    body = anthropic_wire.to_upstream_body(request, None, False)
    assert body["messages"][0]["content"][1] == {
        "type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}
    audio = {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}
    heard = openai_request(messages=[{"role": "user", "content": [{"type": "text", "text": "x"}, audio]}])
    with pytest.raises(anthropic_wire.InvalidRequest, match="input_audio"):
        anthropic_wire.to_upstream_body(heard, None, False)
