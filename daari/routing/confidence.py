"""Confidence of a tier's answer (docs/routing.md, "Confidence"): pure scoring functions and the pass rule.

Heuristic and logprob scores are 0-1; a self-evaluation is a 1-5 rating, counted as rating / 5. The gates
(empty, too short, refusal, acknowledgement only, echo of the prompt) score 0, and a gated answer is never
cached. L6 is never judged.
"""

from __future__ import annotations

import re

from daari.config import ConfidenceConfig
from daari.protocol.chat import Message
from daari.routing.folded import Folded, lower_text

MIN_ANSWER_CHARS = 10  # an answer must be longer than this (after stripping) to count
REFUSAL_WINDOW_CHARS = 160  # refusals lead the answer; later "I can't" is usually quoted text or code

REFUSAL_PATTERNS = (
    r"\bI\s+(?:cannot|can\s+not|can['’]?t)\b",
    r"\bI(?:\s+am|['’]m)\s+(?:unable|not\s+able)\s+to\b",
    r"\bI(?:\s+am|['’]m)\s+(?:sorry|afraid),?\s+but\b",
    r"\bsorry,\s+but\s+I\b",
    r"\bas\s+an\s+(?:AI|artificial\s+intelligence|language\s+model)\b",
    r"\bI\s+(?:won['’]t|will\s+not)\s+be\s+able\s+to\b",
    r"\bI\s+must\s+(?:decline|refuse)\b",
    r"\bI\s+(?:don['’]t|do\s+not)\s+know\b",
)
# One search for any of them (every answer is checked: one regex call, not one per pattern).
REFUSAL = re.compile("|".join(f"(?:{p})" for p in REFUSAL_PATTERNS), re.IGNORECASE)
# Every refusal pattern holds one of these words (lower case); an answer's head without any is no refusal, found
# without the regex (~10-25 us a search on these cores, every answer).
REFUSAL_HINTS = ("can", "able", "but", "ai", "artificial", "language", "must", "know")
_REFUSAL = Folded(REFUSAL, REFUSAL_HINTS)

SELF_EVAL_INSTRUCTION = "Rate 1-5 how complete and correct this answer is. Reply with one digit."
SELF_EVAL_MAX_CHARS = 12_000  # per side; the grader needs the gist, not a second full-length prompt
_SCALE_MENTION = re.compile(r"\b1\s*(?:-|–|to)\s*5\b|(?:/|\bout\s+of\s+)5\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?!\d|\.\d)")


# An answer that only acknowledges: ack words alone, or an ack followed by a promise and nothing else
# ("Ok, any changes I propose will be to those files." is what a small model answers aider's edit request).
ACK_MAX_CHARS = 200
_ACK_WORD = (r"(?:ok(?:ay)?|sure|understood|got\s+it|alright|all\s+right|noted|will\s+do|certainly|of\s+course|yes"
             r"|great|perfect|thanks|thank\s+you|no\s+problem|sounds\s+good|i\s+understand|roger|done)")
ACKNOWLEDGEMENT = re.compile(
    rf"^\W*{_ACK_WORD}(?:\W+{_ACK_WORD})*\W*$"
    rf"|^\W*(?:{_ACK_WORD}\W+)*(?:any\s+(?:changes|edits)\s+I\s+(?:propose|make|suggest)"
    r"|I\s*(?:['’]?ll|will)\s+(?:only\s+)?(?:wait|follow|keep|stick|remember|make\s+sure|do\s+(?:that|it|so|this))\b"
    r"|I\s+won['’]t|I\s+will\s+not|I(?:\s+am|['’]m)\s+ready|ready\s+when|let\s+me\s+know|I\s+understand)"
    r"[^\n`{}<>=]*$",
    re.IGNORECASE,
)
ECHO_MIN_SHARE = 0.8  # a reply that is at least this share of the prompt, copied, is an echo
ECHO_MAX_EXTRA_CHARS = 20  # ...or the prompt copied with at most this much added


def _norm(text: str) -> str:
    # split() and re's \s are the same whitespace (str.isspace): the runs collapsed and the ends stripped as by
    # re.sub(r"\s+", " ", text).strip(), 5x faster; this runs on every message of the history for every answer.
    return " ".join(text.split()).strip(".!?,;:").strip().lower()


def is_acknowledgement(text: str) -> bool:
    stripped = text.strip()
    return 0 < len(stripped) <= ACK_MAX_CHARS and "\n\n" not in stripped and bool(ACKNOWLEDGEMENT.match(stripped))


def is_echo(text: str, last_user: str, history: list[str]) -> bool:
    """The reply repeats the prompt (or copies an earlier message of the conversation) instead of answering it."""
    reply, prompt = _norm(text), _norm(last_user)
    if not reply:
        return False
    for h in history:
        # A message shorter than the reply cannot normalize to it (whitespace only collapses), unless lower()
        # lengthens it ("İ" lowers to two characters): most of a long history is never normalized.
        if (len(h) >= len(reply) or not h.isascii()) and h.strip() and reply == _norm(h):
            return True
    if not prompt:
        return False
    if reply in prompt and len(reply) >= ECHO_MIN_SHARE * len(prompt):
        return True
    return prompt in reply and len(reply) - len(prompt) <= ECHO_MAX_EXTRA_CHARS


def answer_gate(text: str, last_user: str, history: list[str], min_chars: int = MIN_ANSWER_CHARS) -> str | None:
    """Why an answer is no answer at all ("empty", "too_short", "refusal", "acknowledgement", "echo"), or None.

    `min_chars` is the length an answer must exceed: the spec's 10, lowered to 0 by the judge where a short
    answer is the right one (a yes/no classification, a probe that allowed one token); there "Yes." or
    "Ok" is an answer, not an acknowledgement.
    """
    stripped = text.strip()
    if not stripped:
        return "empty"
    if len(stripped) <= min_chars:
        return "too_short"
    if is_refusal(stripped):
        return "refusal"
    if min_chars > 0 and is_acknowledgement(stripped):
        return "acknowledgement"
    if is_echo(stripped, last_user, history):
        return "echo"
    return None


def is_refusal(text: str) -> bool:
    head = text.strip()[:REFUSAL_WINDOW_CHARS]
    return _REFUSAL.found(head, lower_text(head))


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
    """The 0-1 score an answer needs to stay at `tier`: l3_min at L3, l4_min at L4, l5_min at L5, whatever the
    method (a self-evaluation rating r counts as r/5, so the spec's ">= 4/5" is 0.8). L6 is not judged."""
    if method == "self_eval" and tier not in ("L4", "L5"):
        raise ValueError(f"tier {tier!r} is not self-evaluated")
    return {"L4": config.l4_min, "L5": config.l5_min}.get(tier, config.l3_min)
