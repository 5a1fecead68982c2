"""The heuristic classifier (routing spec, R-A1..R-A5, plus the project's R-C*/R-P* rules): task type, rule id
and tier ceiling. docs/routing.md lists every rule, where it differs from the spec and the measurements why.

Rules are data (regexes below) tried in RULE_ORDER; the first that matches wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from daari import task_types as tt
from daari.protocol.chat import ChatRequest
from daari.protocol.tokens import estimate_request_tokens
from daari.routing.agent_turn import uses_tool_api
from daari.routing.client_shapes import is_probe, recognise
from daari.routing.folded import Folded, lower_text

# The spec's size buckets, on the whole request's token estimate (messages + tools).
CLASSIFY_MAX_TOKENS = 50  # R-A1: below this
TRANSFORM_MAX_TOKENS = 200  # R-A2: below this
SMALL_MAX_TOKENS = 500  # R-A3: below this
MEDIUM_MAX_TOKENS = 2000  # R-A4: from SMALL_MAX_TOKENS up to below this; R-A5 from here on
AMBIGUOUS_TOKENS = (200, 800)  # Phase B: a default rule in this band (inclusive) asks the local model

# Agent turns (ADR-0004) take only the size rules: R-A3/R-A4/R-A5 with task type agent_turn.
RULE_ORDER = ("R-C1", "R-C2", "R-C3", "R-A5", "R-A1", "R-A2", "R-P1", "R-P2", "R-A3", "R-A4")
DEFAULT_RULES = ("R-A3", "R-A4")  # the size-only rules: what "the heuristic returns default" means
SIZE_RULE_CEILINGS = (("R-A3", "L3"), ("R-A4", "L4"), ("R-A5", "L6"))
TIER_ORDER = ("L3", "L4", "L5", "L6")

# --- R-A1: tiny classification (the spec's example regex, extended) ------------------------------------
CLASSIFY = re.compile(
    r"\b(?:is\s+(?:this|it|that|there)|are\s+(?:these|they|there)|classify|categori[sz]e"
    r"|which\s+(?:type|kind|category|one|language)|what\s+(?:type|kind|category|language)\s+(?:is|of)"
    r"|yes\s+or\s+no|true\s+or\s+false|label\s+(?:this|these|the)|sentiment)\b",
    re.IGNORECASE,
)
# --- R-A2: small reformat / extract (the spec's example regex, extended) --------------------------------
EXTRACT = re.compile(r"\b(?:extract\w*|parse|pull\s+out|list\s+(?:all|every)\s+(?:the\s+)?\w+\s+(?:in|from))\b",
                     re.IGNORECASE)
TRANSFORM = re.compile(
    r"\b(?:format|reformat\w*|pretty[- ]?print|minify|convert\w*|transform\s+(?:this|these|it)|sort"
    r"|(?:to|into|as)\s+(?:json|yaml|yml|csv|xml|toml|markdown|a\s+table)|snake_case|camelCase|kebab-case"
    r"|uppercase|lowercase|title\s+case|translate\b.{1,80}?\b(?:to|into))\b",
    re.IGNORECASE | re.DOTALL,
)
# --- R-P1 (project): long reasoning, design and review work, whatever the size -------------------------
HEAVY = re.compile(
    r"\barchitectur(?:e|al)\b|\bmicroservices?\b|\bmonolith\w*\b"
    r"|\bdesign\s+(?:review|doc(?:ument)?)\b|\bsystem\s+design\b"
    r"|\b(?:review|critique|evaluate|assess)\s+(?:the|my|our|this|a)\s+(?:\w+\s+){0,2}(?:design|system)\b"
    r"|\bdesign\s+(?:a|an|the)\s+(?:\w+\s+){0,3}(?:system|service|platform|pipeline|protocol|database\s+schema)\b"
    r"|\bsecurity\s+(?:audit|review)\b|\baudit\s+(?:\w+\s+){0,3}(?:security|vulnerabilit)|\bthreat\s+model"
    r"|\bprove\b|\bproof\b"
    r"|\bmulti-?file\b|\bacross\s+(?:multiple|several|many|all(?:\s+the)?)\s+(?:\w+\s+)?(?:files|modules|services)\b"
    r"|\b(?:at\s+least|about|around|over)?\s*[3-9]\d{2,}\+?\s*words\b"
    r"|\bstep[- ]by[- ]step\b.{0,80}\b(?:plan|design|architect|migrat|system|roll-?out)"
    r"|\b(?:plan|design|architect|migrat\w*|roll-?out)\b.{0,80}\bstep[- ]by[- ]step\b",
    re.IGNORECASE | re.DOTALL,
)
# --- R-P2 (project): writing, fixing or restructuring code ---------------------------------------------
CODE_WORK = re.compile(
    r"\bimplement(?:ing)?\b"
    r"|\b(?:write|create|generate|build)\s+(?:me\s+)?(?:a|an|the|some)?\s*"
    r"(?:(?!(?:to|for|of|in|on|about|this|that|these|my|the|your)\b)[\w-]+\s+){0,3}?"
    r"(?:function|class|method|tests?|test\s+suite|unit\s+tests?|script|program|module|endpoint|parser"
    r"|component|cli|migration|workflow|dockerfile|makefile|pipeline)\b"
    r"|\badd\s+(?:some\s+|more\s+|a\s+)?(?:unit\s+|integration\s+)?tests?\b"
    r"|\brefactor\w*\b"
    r"|\bfix\s+(?:this|the|my|a|an|that|these)\s+(?:[\w-]+\s+)?(?:bug|bugs|error|crash|failure|exception|tests?|code"
    r"|issue)\b"
    r"|\b(?:review|audit)\s+(?:this|the|my|our)\s+(?:diff|code|pr|pull\s+request|change|patch|function|commit)\b"
    r"|\bcode\s+review\b|\b(?:problems|issues|bugs)\s+(?:with|in)\s+(?:this|my|the)\s+(?:code|function|diff)\b"
    r"|\bwith\s+(?:unit\s+)?tests\b"
    r"|\bdebug(?:ging)?\b(?!ger)",
    re.IGNORECASE,
)

RULE_OUTCOME: dict[str, tuple[str, str]] = {
    "R-A1": (tt.CLASSIFY, "L3"),
    "R-A2": (tt.TRANSFORM, "L3"),
    "R-A3": (tt.GENERATE_SMALL, "L3"),
    "R-A4": (tt.GENERATE_SMALL, "L4"),
    "R-A5": (tt.GENERATE_LARGE, "L6"),
    "R-P1": (tt.GENERATE_LARGE, "L6"),
    "R-P2": (tt.GENERATE_SMALL, "L4"),
    "R-C1": (tt.GENERATE_SMALL, "L3"),
}


@dataclass(frozen=True)
class Classification:
    task_type: str  # one of task_types.MODEL_TASK_TYPES
    rule_id: str  # R-A1..R-A5, R-C1..R-C3, R-P1, R-P2 (R-B1 when the Phase B classifier decided)
    ceiling: str  # the tier the rules say the task needs: L3 | L4 | L5 | L6
    tokens: int  # estimate for the whole request (messages + tools)
    ambiguous: bool = False  # a default rule in the ambiguous band with no Lt match: Phase B may ask the SLM
    escalate: bool = True  # False for probes: one attempt on the cheapest tier, whatever its confidence


def last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text()
    return ""


def size_rule(tokens: int) -> tuple[str, str]:
    """The spec's size buckets alone: (rule id, ceiling)."""
    if tokens >= MEDIUM_MAX_TOKENS:
        return "R-A5", "L6"
    if tokens >= SMALL_MAX_TOKENS:
        return "R-A4", "L4"
    return "R-A3", "L3"


def at_least(tier: str, floor: str) -> str:
    return tier if TIER_ORDER.index(tier) >= TIER_ORDER.index(floor) else floor


# The rules above, run on the lower-cased text where that finds the same (routing/folded.py).
# HEAVY's alternatives can start anywhere (an optional lead-in, then digits): every match holds one of these words.
HEAVY_HINTS = ("architectur", "microservice", "monolith", "design", "system", "security", "audit", "threat", "prove",
               "proof", "multi", "across", "words", "step")
# The same gate for the other rules: each alternative's match holds one of its rule's words (for the "what ... is"
# and "as/to/into ... json" alternatives, a word of the list they end with; for "add ... tests", "test"). A
# regex search tries every alternative at every position, ~9,000-16,000 instructions per rule on a one-line
# prompt; a prompt holding none of the words (most) is no match without it (tests/test_rule_scans.py).
CLASSIFY_HINTS = ("is", "are", "classify", "categor", "which", "type", "kind", "language", "yes", "true", "label",
                  "sentiment")
EXTRACT_HINTS = ("extract", "parse", "pull", "list")
TRANSFORM_HINTS = ("format", "pretty", "minify", "convert", "transform", "sort", "json", "yaml", "yml", "csv", "xml",
                   "toml", "markdown", "table", "snake_case", "camelcase", "kebab-case", "uppercase", "lowercase",
                   "title", "translate")
CODE_WORK_HINTS = ("implement", "write", "create", "generate", "build", "test", "refactor", "fix", "review", "audit",
                   "problem", "issue", "bug")
_CLASSIFY = Folded(CLASSIFY, CLASSIFY_HINTS)
_EXTRACT = Folded(EXTRACT, EXTRACT_HINTS)
_TRANSFORM = Folded(TRANSFORM, TRANSFORM_HINTS)
_CODE_WORK = Folded(CODE_WORK, CODE_WORK_HINTS)
_HEAVY = Folded(HEAVY, HEAVY_HINTS)


def _keyword_rule(text: str, tokens: int, lower: str | None) -> str | None:
    """The first keyword rule that matches; `lower` is `lower_text(text)`."""
    if tokens < CLASSIFY_MAX_TOKENS and _CLASSIFY.found(text, lower):
        return "R-A1"
    if tokens < TRANSFORM_MAX_TOKENS and (_TRANSFORM.found(text, lower) or _EXTRACT.found(text, lower)):
        return "R-A2"
    if _HEAVY.found(text, lower):
        return "R-P1"
    if _CODE_WORK.found(text, lower):
        return "R-P2"
    return None


def keyword_outcome(text: str, tokens: int) -> tuple[str, str] | None:
    """The keyword rule that matches the text and its task type (R-A2: extract when only EXTRACT matches)."""
    lower = lower_text(text)
    rule_id = _keyword_rule(text, tokens, lower)
    if rule_id is None:
        return None
    task_type = RULE_OUTCOME[rule_id][0]
    if rule_id == "R-A2" and _EXTRACT.found(text, lower) and not _TRANSFORM.found(text, lower):
        task_type = tt.EXTRACT
    return rule_id, task_type


# The hybrid stage's question to the tool tiers (routing spec, Phase B): does an Lt pattern match this text?
# Given by whoever builds the classify step (the Lt tier's matcher when tools are on): pure and fast.
LtProbe = Callable[[str], bool]


def no_lt_probe(text: str) -> bool:
    return False


def classify(request: ChatRequest, lt_probe: LtProbe = no_lt_probe) -> Classification:
    """First matching rule of RULE_ORDER, on the last user message's text and the whole request's size."""
    text = last_user_text(request).strip()
    tokens = estimate_request_tokens(request)
    size_id, size_ceiling = size_rule(tokens)
    shape = recognise(request)
    if shape == "side_call":
        # R-C1: as cheap as possible. A probe never escalates (nobody reads its answer); a title or topic call
        # does when its answer fails the judge (a title that breaks its stated format is not worth keeping).
        return Classification(tt.GENERATE_SMALL, "R-C1", "L3", tokens, escalate=not is_probe(request))
    if shape == "edit_format":  # R-C2: the answer must be edits; a small model only acknowledges
        task = tt.GENERATE_LARGE if size_id == "R-A5" else tt.GENERATE_SMALL
        return Classification(task, "R-C2", at_least(size_ceiling, "L4"), tokens)
    if shape == "xml_tools":  # R-C3: an agent whose tools live in its system prompt
        return Classification(tt.AGENT_TURN, "R-C3", at_least(size_ceiling, "L4"), tokens)
    # ADR-0004: agent turns start at L3; larger ones where they fit (size rules). `recognise` ruled XML tools
    # out already, so what is left of is_agent_turn is the tool API, or a shape daari does not know.
    if uses_tool_api(request) or request.shapes.unknown:
        return Classification(tt.AGENT_TURN, size_id, size_ceiling, tokens)
    if size_id == "R-A5":
        return Classification(tt.GENERATE_LARGE, "R-A5", "L6", tokens)
    keyword = keyword_outcome(text, tokens)
    if keyword is not None:
        rule_id, task_type = keyword
        return Classification(task_type, rule_id, at_least(RULE_OUTCOME[rule_id][1], size_ceiling), tokens)
    task_type, ceiling = RULE_OUTCOME[size_id]
    low, high = AMBIGUOUS_TOKENS
    ambiguous = low <= tokens <= high and not lt_probe(text)
    return Classification(task_type, size_id, ceiling, tokens, ambiguous=ambiguous)
