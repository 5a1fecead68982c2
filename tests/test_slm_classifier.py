"""Phase B: the classifier prompt, the tolerant verdict parser, and how a verdict overrides the heuristic."""

from __future__ import annotations

import pytest

from daari.protocol.chat import ChatRequest, Message
from daari.routing.classifier import Classification
from daari.routing.slm_classifier import (
    MAX_QUERY_CHARS,
    SLMVerdict,
    apply_verdict,
    classifier_messages,
    parse_verdict,
)


def test_prompt_is_few_shot_and_ends_with_the_users_question() -> None:
    request = ChatRequest(model="m", messages=[
        Message("system", "client system prompt"), Message("user", "first"),
        Message("assistant", "reply"), Message("user", "  summarize my notes  "),
    ])
    messages = classifier_messages(request)
    assert messages[0].role == "system" and "JSON" in messages[0].text()
    assert messages[-1].role == "user" and messages[-1].text() == "summarize my notes"
    shots = messages[1:-1]
    assert [m.role for m in shots] == ["user", "assistant"] * (len(shots) // 2) and shots
    for answer in shots[1::2]:  # every example answer is itself a valid verdict
        assert parse_verdict(answer.text()) is not None
    assert all("client system prompt" not in m.text() for m in messages)


def test_prompt_clips_a_long_question() -> None:
    request = ChatRequest(model="m", messages=[Message("user", "a" * 10_000 + "TAIL")])
    last = classifier_messages(request)[-1].text()
    assert len(last) <= MAX_QUERY_CHARS + 10 and last.endswith("TAIL")


@pytest.mark.parametrize("reply", [
    '{"task_type": "generate_small", "suggested_tier": "L4", "confidence": 0.8}',
    '```json\n{"task_type": "generate_small", "suggested_tier": "L4", "confidence": 0.8}\n```',
    'Sure! Here is the classification:\n{"task_type": "generate_small", "suggested_tier": "L4", '
    '"confidence": 0.8} Hope this helps.',
    '{"task_type": "Generate_Small", "suggested_tier": "l4", "confidence": "0.8"}',
    'not json {oops} then {"task_type": "generate_small", "suggested_tier": "L4", "confidence": 0.8}',
])
def test_parse_verdict_tolerates_fences_prose_and_case(reply: str) -> None:
    assert parse_verdict(reply) == SLMVerdict("generate_small", "L4", 0.8)


def test_parse_verdict_accepts_integer_confidence_bounds() -> None:
    assert parse_verdict('{"task_type": "classify", "suggested_tier": "L3", "confidence": 1}') == \
        SLMVerdict("classify", "L3", 1.0)
    assert parse_verdict('{"task_type": "classify", "suggested_tier": "L3", "confidence": 0}') == \
        SLMVerdict("classify", "L3", 0.0)


@pytest.mark.parametrize("reply", [
    "",
    "generate_small, L4",
    '{"task_type": "generate_small", "suggested_tier": "L4"}',
    '{"task_type": "poetry", "suggested_tier": "L4", "confidence": 0.8}',
    '{"task_type": "classify", "suggested_tier": "L2", "confidence": 0.8}',
    '{"task_type": "classify", "suggested_tier": "L7", "confidence": 0.8}',
    '{"task_type": "classify", "suggested_tier": "L3", "confidence": 1.5}',
    '{"task_type": "classify", "suggested_tier": "L3", "confidence": -0.1}',
    '{"task_type": "classify", "suggested_tier": "L3", "confidence": true}',
    '{"task_type": "classify", "suggested_tier": "L3", "confidence": "high"}',
    '{"task_type": "classify", "suggested_tier": "L3", "confidence": NaN}',
    '{"task_type": 3, "suggested_tier": "L3", "confidence": 0.5}',
    '["chat", "L3", 0.5]',
    '{"task_type": "classify", "suggested_tier": "L3", "confidence": 0.5',  # cut off
])
def test_parse_verdict_rejects_malformed_or_out_of_range(reply: str) -> None:
    assert parse_verdict(reply) is None


AMBIGUOUS = Classification("generate_small", "R-A3", "L3", 400, True)


def test_confident_verdict_replaces_an_ambiguous_result() -> None:
    result = apply_verdict(AMBIGUOUS, SLMVerdict("generate_large", "L5", 0.9))
    assert result == Classification("generate_large", "R-B1", "L5", 400, False)


@pytest.mark.parametrize("verdict", [None, SLMVerdict("generate_small", "L4", 0.3)])
def test_missing_or_unsure_verdict_keeps_the_heuristic(verdict: SLMVerdict | None) -> None:
    assert apply_verdict(AMBIGUOUS, verdict) == AMBIGUOUS


def test_verdict_never_overrides_a_rule_that_matched() -> None:
    matched = Classification("transform", "R-A2", "L3", 400, False)
    assert apply_verdict(matched, SLMVerdict("generate_large", "L6", 1.0)) == matched

