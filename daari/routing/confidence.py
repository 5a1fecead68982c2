"""Confidence of a tier's answer (docs/routing.md, "Confidence"): pure scoring functions and the pass rule.

Heuristic and logprob scores are 0-1; a self-evaluation is a 1-5 rating. L6 is never judged.
"""

from __future__ import annotations

import re

from daari.config import ConfidenceConfig
from daari.protocol.chat import Message

MIN_ANSWER_CHARS = 10  # an answer must be longer than this (after stripping) to count
REFUSAL_WINDOW_CHARS = 160  # refusals lead the answer; later "I can't" is usually quoted text or code

REFUSAL_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\bI\s+(?:cannot|can\s+not|can['’]?t)\b",
        r"\bI(?:\s+am|['’]m)\s+(?:unable|not\s+able)\s+to\b",
        r"\bI(?:\s+am|['’]m)\s+(?:sorry|afraid),?\s+but\b",
        r"\bsorry,\s+but\s+I\b",
        r"\bas\s+an\s+(?:AI|artificial\s+intelligence|language\s+model)\b",
        r"\bI\s+(?:won['’]t|will\s+not)\s+be\s+able\s+to\b",
        r"\bI\s+must\s+(?:decline|refuse)\b",
        r"\bI\s+(?:don['’]t|do\s+not)\s+know\b",
    )
)

SELF_EVAL_INSTRUCTION = "Rate 1-5 how complete and correct this answer is. Reply with one digit."
SELF_EVAL_MAX_CHARS = 12_000  # per side; the grader needs the gist, not a second full-length prompt
_SCALE_MENTION = re.compile(r"\b1\s*(?:-|–|to)\s*5\b|(?:/|\bout\s+of\s+)5\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?!\d|\.\d)")


def is_refusal(text: str) -> bool:
    head = text.strip()[:REFUSAL_WINDOW_CHARS]
    return any(p.search(head) for p in REFUSAL_PATTERNS)


def heuristic_confidence(text: str) -> float:
    """1.0 when the answer is longer than 10 characters and does not open with a refusal, else 0.0.

    Binary on purpose: length and refusal are gates, not evidence of quality, so grading them would
    only pretend to a precision the heuristic does not have.
    """
    if len(text.strip()) <= MIN_ANSWER_CHARS or is_refusal(text):
        return 0.0
    return 1.0


def logprob_confidence(mean_logprob: float, floor: float) -> float:
    """Mean token log-probability mapped linearly onto [0, 1]: 0 -> 1.0, `floor` (or lower) -> 0.0."""
    if floor >= 0:
        raise ValueError(f"logprob floor must be negative, got {floor}")
    return min(1.0, max(0.0, 1.0 - mean_logprob / floor))


def answer_confidence(text: str, mean_logprob: float | None, floor: float) -> float:
    """The 0-1 score: the heuristic gate, refined by logprobs when the executor returned them."""
    gate = heuristic_confidence(text)
    if gate == 0.0 or mean_logprob is None:
        return gate
    return logprob_confidence(mean_logprob, floor)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def self_eval_messages(question: str, answer: str) -> list[Message]:
    """The grading prompt an L4/L5 model answers about its own answer."""
    prompt = (
        f"Question:\n{_clip(question, SELF_EVAL_MAX_CHARS)}\n\n"
        f"Answer:\n{_clip(answer, SELF_EVAL_MAX_CHARS)}\n\n"
        f"{SELF_EVAL_INSTRUCTION}"
    )
    return [
        Message(role="system", content="You grade answers strictly. You reply with one digit from 1 to 5."),
        Message(role="user", content=prompt),
    ]


def parse_self_eval(text: str) -> int | None:
    """The rating in a grader's reply: the first number once scale mentions ("1-5", "/5", "out of 5") are
    dropped, if it is an integer 1-5; anything else is None, which counts as a fail."""
    match = _NUMBER.search(_SCALE_MENTION.sub(" ", text))
    if match is None or "." in match.group():
        return None
    value = int(match.group())
    return value if 1 <= value <= 5 else None


def passing_score(tier: str, method: str, config: ConfidenceConfig) -> float:
    """The 0-1 score an answer needs to stay at `tier`. A self-evaluation rating r counts as r/5, held to
    l4_min/5 (L4) or l5_min/5 (L5); every other method (heuristic, logprob, tool calls) to l3_min."""
    if method == "self_eval":
        if tier not in ("L4", "L5"):
            raise ValueError(f"tier {tier!r} is not self-evaluated")
        return (config.l4_min if tier == "L4" else config.l5_min) / 5.0
    return config.l3_min
