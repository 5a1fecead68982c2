"""Phase B hybrid classifier: the prompt that asks the L3 model to classify, and the tolerant verdict parser.

Only ambiguous heuristic results (a size-only rule, 200-800 tokens, no Lt match) are sent; a verdict that
cannot be parsed, or one below MIN_VERDICT_CONFIDENCE, leaves the heuristic's classification in place
(docs/routing.md, Phase B).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass

from daari.config import TIER_NAMES
from daari.protocol.chat import ChatRequest, Message
from daari.routing.classifier import Classification, last_user_text
from daari.task_types import AGENT_TURN, MODEL_TASK_TYPES

TASK_TYPES = tuple(t for t in MODEL_TASK_TYPES if t != AGENT_TURN)  # agent turns are never ambiguous
MIN_VERDICT_CONFIDENCE = 0.6
MAX_QUERY_CHARS = 2000  # the classifier is a 135M model: keep its prompt a few hundred tokens
SLM_RULE_ID = "R-B1"

SYSTEM_PROMPT = (
    "Classify the user's request. Reply with one JSON object only: "
    '{"task_type": one of classify, extract, transform, generate_small, generate_large; '
    '"suggested_tier": L3 for easy, L4 for code work, L5 for hard, L6 for expert; '
    '"confidence": a number from 0 to 1}.'
)

# Few-shot pairs: one per common outcome, short enough for a small model to copy the shape.
FEW_SHOT: tuple[tuple[str, dict[str, object]], ...] = (
    ("What is the capital of Italy?",
     {"task_type": "generate_small", "suggested_tier": "L3", "confidence": 0.9}),
    ("Write a Python function that merges two sorted lists.",
     {"task_type": "generate_small", "suggested_tier": "L4", "confidence": 0.8}),
    ("Review the design of our payment service for race conditions and data loss.",
     {"task_type": "generate_large", "suggested_tier": "L6", "confidence": 0.7}),
)

_FENCE = re.compile(r"```(?:json|JSON)?")


@dataclass(frozen=True)
class SLMVerdict:
    task_type: str
    suggested_tier: str  # L3..L6
    confidence: float  # 0..1


def _clip_query(text: str) -> str:
    if len(text) <= MAX_QUERY_CHARS:
        return text
    half = MAX_QUERY_CHARS // 2
    return f"{text[:half]}\n...\n{text[-half:]}"


def classifier_messages(request: ChatRequest) -> list[Message]:
    messages = [Message(role="system", content=SYSTEM_PROMPT)]
    for question, answer in FEW_SHOT:
        messages.append(Message(role="user", content=question))
        messages.append(Message(role="assistant", content=json.dumps(answer)))
    messages.append(Message(role="user", content=_clip_query(last_user_text(request).strip())))
    return messages


def _first_json_object(text: str) -> dict[str, object] | None:
    decoder = json.JSONDecoder()
    cleaned = _FENCE.sub(" ", text)
    for match in re.finditer(r"\{", cleaned):
        try:
            value, _ = decoder.raw_decode(cleaned, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_verdict(text: str) -> SLMVerdict | None:
    """The first JSON object in the reply, fences and prose around it ignored; None if anything is off."""
    data = _first_json_object(text)
    if data is None:
        return None
    task_type, tier, confidence = data.get("task_type"), data.get("suggested_tier"), data.get("confidence")
    if not isinstance(task_type, str) or task_type.strip().lower() not in TASK_TYPES:
        return None
    if not isinstance(tier, str) or tier.strip().upper() not in TIER_NAMES:
        return None
    if isinstance(confidence, str):
        try:
            confidence = float(confidence)
        except ValueError:
            return None
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        return None
    return SLMVerdict(task_type.strip().lower(), tier.strip().upper(), float(confidence))


def apply_verdict(heuristic: Classification, verdict: SLMVerdict | None,
                  min_confidence: float = MIN_VERDICT_CONFIDENCE) -> Classification:
    """The hybrid result: the verdict replaces an ambiguous heuristic result when it is confident enough."""
    if verdict is None or not heuristic.ambiguous or verdict.confidence < min_confidence:
        return heuristic
    return dataclasses.replace(heuristic, task_type=verdict.task_type, ceiling=verdict.suggested_tier,
                               rule_id=SLM_RULE_ID, ambiguous=False)
