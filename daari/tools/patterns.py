"""Which command a message asks for, and how sure we are: the DEV and LT patterns with a match confidence.

A message scores 1.0 only when, politeness aside, it *is* the command ("git status", "run the tests
please"). Otherwise the score is 0.9 x the share of the message the command phrase covers, so it never
reaches the 0.95 Lt needs; a question ("why does git status ...?") is capped at 0.5. Matching is ASCII-only
(re.ASCII): a look-alike letter never matches. See docs/tools.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_MESSAGE_CHARS = 300  # a longer message is never a bare command
PARTIAL_WEIGHT = 0.9
QUESTION_CAP = 0.5

_FLAGS = re.IGNORECASE | re.ASCII
_POLITE_LEAD = re.compile(r"^(?:(?:please|pls|hey|ok|okay|now|so|just|kindly|daari|can you|could you|would you|"
                          r"will you|go ahead and|i want you to|i'd like you to)[,!]?\s+)+", _FLAGS)
_POLITE_TAIL = re.compile(r"(?:[,\s]+(?:please|pls|thanks|thank you|now|for me|"
                          r"(?:in|on|for) (?:the|this|my|our) (?:repo|repository|project|workspace|checkout)))+$",
                          _FLAGS)
_QUESTION_LEAD = re.compile(r"^(?:why|what|how|when|where|which|who|whose|does|do|did|is|are|was|were|should|"
                            r"shall|can i|could i|may i|explain|tell me (?:why|what|how))\b", _FLAGS)
# Every pattern contains one of these: a message without any is no command (checked first, it is cheap).
_KEYWORDS = ("git", "test", "lint", "build", "./", "prettier", "prettify", "format", "rename", "optimi")
_IDENT = r"[A-Za-z_$][A-Za-z0-9_$]*"
_PATH = r"[A-Za-z0-9_][A-Za-z0-9_./-]*"


@dataclass(frozen=True)
class Pattern:
    rule_id: str
    intent: str  # git_status, git_diff, test, lint, build, script, ccs_read, rerun, eslint, prettier, ...
    full: re.Pattern[str]  # the whole message (politeness stripped) is the command
    core: re.Pattern[str]  # the command phrase anywhere in the message
    question_form: bool = False  # DEV-06 is asked as a question


@dataclass(frozen=True)
class CommandMatch:
    rule_id: str
    intent: str
    confidence: float
    slots: dict[str, str] = field(default_factory=dict)


def _pattern(rule_id: str, intent: str, full: str, core: str | None = None, *, question_form: bool = False) -> Pattern:
    return Pattern(rule_id, intent, re.compile(full, _FLAGS), re.compile(core or full, _FLAGS), question_form)


_RUN = r"(?:(?:run|execute|do|start|launch)\s+)"
_KIND = r"(?P<kind>tests?|lint(?:er|ing)?|build)"

# Order breaks ties: the L2-dev rules (DEV) come before the generic Lt patterns.
PATTERNS: tuple[Pattern, ...] = (
    _pattern("DEV-01", "git_status", rf"{_RUN}?git\s+status", r"git\s+status"),
    _pattern("DEV-02", "git_diff", rf"{_RUN}?git\s+diff(?:\s+(?P<staged>--staged|--cached))?", r"git\s+diff"),
    _pattern("DEV-07", "rerun",
             rf"(?:re-?run|run\s+again)\s+(?:the\s+)?{_KIND}(?:\s+again)?"
             rf"|run\s+(?:the\s+)?{_KIND.replace('kind', 'kind2')}\s+again",
             r"re-?run\s+(?:the\s+)?(?:tests?|lint)|run\s+(?:the\s+)?(?:tests?|lint)\s+again"),
    _pattern("DEV-06", "ccs_read",
             r"(?:what\s+did\s+(?:the\s+)?(?P<kind>tests?|lint(?:er)?)\s+(?:say|show|output|report)"
             r"|(?:show\s+(?:me\s+)?)?(?:the\s+)?last\s+(?P<kind2>test|lint)\s+(?:output|results?|run))",
             r"what\s+did\s+(?:the\s+)?(?:tests?|lint)\s+(?:say|show)|last\s+test\s+output", question_form=True),
    _pattern("DEV-03", "test",
             rf"{_RUN}(?:the\s+|all\s+(?:the\s+)?|my\s+|our\s+)?(?:unit\s+)?tests?(?:\s+suite)?"
             r"|npm\s+(?:run\s+)?test|pytest|test\s+it",
             r"run\s+(?:the\s+)?tests|npm\s+test|pytest"),
    _pattern("DEV-04", "lint", rf"{_RUN}(?:the\s+)?(?:lint|linter|linters|linting)"
             r"|lint\s+(?:the\s+|this\s+|my\s+)?(?:code|project|repo|repository)",
             r"run\s+lint|run\s+(?:the\s+)?linter"),
    _pattern("DEV-05", "script",
             rf"{_RUN}(?:the\s+)?(?:script\s+)?(?P<script>\./[A-Za-z0-9_./-]+\.(?:sh|py))",
             r"run\s+(?:script\s+)?\./[A-Za-z0-9_./-]+\.(?:sh|py)"),
    _pattern("DEV-08", "build", rf"{_RUN}(?:the\s+)?build|build\s+(?:the\s+|this\s+|my\s+)?(?:project|app|code)",
             r"run\s+(?:the\s+)?build"),
    _pattern("LT-01", "eslint", rf"{_RUN}?eslint(?:\s+(?:on|in|over)\s+(?P<target>{_PATH}))?",
             r"run\s+eslint|run\s+lint"),
    _pattern("LT-02", "prettier",
             r"(?:format|prettify)\s+(?:this\s+|the\s+|my\s+)?(?:file|code|project|repo)(?:\s+with\s+prettier)?"
             rf"|{_RUN}?prettier(?:\s+(?:on|in|over)\s+(?P<target>{_PATH}))?",
             r"format\s+(?:this\s+|the\s+)?(?:file|code)"),
    _pattern("LT-03", "git_status", r"(?:show|print|give|get)(?:\s+me)?\s+(?:the\s+)?(?:current\s+)?git\s+status"
             r"(?:\s+output)?", r"git\s+status"),
    _pattern("LT-04", "git_diff", r"(?:show|print|give|get)(?:\s+me)?\s+(?:the\s+)?(?:current\s+)?git\s+diff"
             r"(?:\s+output)?", r"git\s+diff"),
    _pattern("LT-05", "rename",
             rf"rename\s+(?:the\s+)?(?P<kind>symbol|method|class|function|variable|field)\s+(?P<old>{_IDENT})"
             rf"\s+to\s+(?P<new>{_IDENT})(?:\s+in\s+(?P<scope>{_PATH}))?",
             r"rename\s+(?:symbol|method|class)"),
    _pattern("LT-06", "optimize_imports",
             rf"optimi[sz]e\s+(?:the\s+)?imports(?:\s+(?:in|of|for)\s+(?P<target>{_PATH}))?",
             r"optimi[sz]e\s+imports"),
)


def _strip_politeness(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = _POLITE_LEAD.sub("", text)
        text = _POLITE_TAIL.sub("", text).strip()
    return text


def _unwrap(text: str) -> str:
    if len(text) > 2 and text[0] == text[-1] and text[0] in "`'\"" and text[0] not in text[1:-1]:
        return text[1:-1].strip()
    return text


def command_matches(message: str) -> list[CommandMatch]:
    """Every pattern the message matches, best first (ties keep PATTERNS order)."""
    text = message.strip()
    if not text or len(text) > MAX_MESSAGE_CHARS:
        return []
    lowered = text.lower()
    if not any(word in lowered for word in _KEYWORDS):
        return []
    one_line = "\n" not in text and "\r" not in text
    request_form = bool(_POLITE_LEAD.match(text))  # "can you run the tests?" asks for an action
    question = not request_form and (text.endswith("?") or bool(_QUESTION_LEAD.match(text)))
    body = _unwrap(_strip_politeness(re.sub(r"[.!?\s]+$", "", " ".join(text.split()) if one_line else text)))
    found: list[CommandMatch] = []
    for pattern in PATTERNS:
        full = pattern.full.fullmatch(body) if one_line and body else None
        if full is not None:
            confidence = 1.0 if (not question or pattern.question_form) else QUESTION_CAP
            slots = {k.rstrip("2"): v for k, v in full.groupdict().items() if v is not None}
            found.append(CommandMatch(pattern.rule_id, pattern.intent, confidence, slots))
            continue
        core = pattern.core.search(text)
        if core is None:
            continue
        confidence = PARTIAL_WEIGHT * len(core.group()) / len(text)
        if question and not pattern.question_form:
            confidence = min(confidence, QUESTION_CAP)
        found.append(CommandMatch(pattern.rule_id, pattern.intent, round(confidence, 3)))
    found.sort(key=lambda m: -m.confidence)
    return found


def best_command(message: str) -> CommandMatch | None:
    matches = command_matches(message)
    return matches[0] if matches else None


def is_lt_command(message: str, min_confidence: float = 0.95) -> bool:
    """The hybrid classifier's Lt probe (routing/classifier.py LtProbe): would the Lt or CCS tier act on this?"""
    best = best_command(message)
    return best is not None and best.confidence >= min_confidence
