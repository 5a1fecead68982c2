"""Does a cached answer still say what a fresh one says? agree / disagree / undecided, and why.

Decisive checks first, in order: the same text (whitespace folded); both answers JSON (equal values agree,
anything else disagrees); the judge's gates (one answer a refusal or empty and the other not: disagree); the
fenced code blocks, compared exactly (trailing spaces aside): the same blocks agree, any difference disagrees,
a renamed variable included, which errs toward demoting an entry rather than keeping a wrong one; the lexical
verifier's rules over the two answers (no difference found: agree). Then the answers' embedding similarity:
at or above `agree_at` agree, below `disagree_below` disagree, between: undecided. Without an embedding (L1's
model is off or not loaded) what the rules could not decide stays undecided: the rate counts only decided
samples.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from daari.routing.confidence import is_refusal
from daari.semantic.lexical import lexical_verdict

Outcome = Literal["agree", "disagree", "undecided"]
AGREE_AT = 0.90  # all-MiniLM-L6-v2 cosine of two answers; docs/caching.md ("Trust") says how these were chosen
DISAGREE_BELOW = 0.70

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)|~~~[^\n~]*\n(.*?)(?:~~~|\Z)", re.DOTALL)
_JSON_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


@dataclass(frozen=True)
class Comparison:
    outcome: Outcome
    reason: str  # "exact", "json", "gate", "code", "lexical", "similarity", "no_embedding"
    similarity: float | None = None  # the answers' embedding cosine, when it was asked

    def to_json(self) -> dict[str, object]:
        return {"outcome": self.outcome, "reason": self.reason, "similarity": self.similarity}


def _fold(text: str) -> str:
    return " ".join(text.split())


def code_blocks(text: str) -> list[str]:
    """Fenced code blocks, each with trailing spaces and blank edges dropped (what a copy-paste keeps)."""
    blocks = []
    for match in _FENCE.finditer(text):
        body = match.group(1) if match.group(1) is not None else match.group(2) or ""
        blocks.append("\n".join(line.rstrip() for line in body.strip("\n").splitlines()))
    return blocks


def json_value(text: str) -> tuple[bool, object]:
    """(True, value) when the whole answer is JSON (bare, or one fenced block); (False, None) otherwise."""
    stripped = text.strip()
    fenced = _JSON_FENCE.match(stripped)
    if fenced is not None:
        stripped = fenced.group(1).strip()
    if not stripped or stripped[0] not in "{[":
        return False, None
    try:
        return True, json.loads(stripped)
    except ValueError:
        return False, None


def _gate(text: str) -> str | None:
    stripped = text.strip()
    if not stripped:
        return "empty"
    return "refusal" if is_refusal(stripped) else None


def decide_by_rules(cached: str, fresh: str) -> Comparison | None:
    """What the content rules decide on their own, before any embedding (None: they cannot tell)."""
    if _fold(cached) == _fold(fresh):
        return Comparison("agree", "exact")
    cached_is_json, cached_value = json_value(cached)
    fresh_is_json, fresh_value = json_value(fresh)
    if cached_is_json or fresh_is_json:
        same = cached_is_json and fresh_is_json and cached_value == fresh_value
        return Comparison("agree" if same else "disagree", "json")
    if _gate(cached) != _gate(fresh):
        return Comparison("disagree", "gate")
    return None


def compare_answers(cached: str, fresh: str, similarity: float | None = None, *, agree_at: float = AGREE_AT,
                    disagree_below: float = DISAGREE_BELOW) -> Comparison:
    """The verdict on a cached answer against a fresh one. `similarity`: the two answers' embedding cosine."""
    ruled = decide_by_rules(cached, fresh)
    if ruled is not None:
        return ruled
    cached_code, fresh_code = code_blocks(cached), code_blocks(fresh)
    if cached_code or fresh_code:
        return Comparison("agree" if cached_code == fresh_code else "disagree", "code", similarity)
    if lexical_verdict(cached, fresh).same:
        return Comparison("agree", "lexical", similarity)
    if similarity is None:
        return Comparison("undecided", "no_embedding")
    if similarity >= agree_at:
        return Comparison("agree", "similarity", similarity)
    if similarity < disagree_below:
        return Comparison("disagree", "similarity", similarity)
    return Comparison("undecided", "similarity", similarity)


def needs_embedding(cached: str, fresh: str) -> bool:
    """Whether `compare_answers` would read an embedding similarity (so a caller may skip asking for one)."""
    if decide_by_rules(cached, fresh) is not None:
        return False
    cached_code, fresh_code = code_blocks(cached), code_blocks(fresh)
    if cached_code or fresh_code:
        return False
    return not lexical_verdict(cached, fresh).same
