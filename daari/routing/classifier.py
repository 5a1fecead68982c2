"""The heuristic classifier (docs/routing.md, rules R-A0..R-A5): task type, rule id and tier ceiling.

Rules are data (regexes below); `classify` tries them in RULE_ORDER, most demanding first, first match wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from daari.protocol.chat import ChatRequest
from daari.routing.tokens import estimate_request_tokens, estimate_text_tokens

SHORT_QUESTION_TOKENS = 30  # R-A1: measured on the last user message alone
SMALL_INPUT_TOKENS = 800  # R-A2 / R-A3 upper bound, R-A4 lower bound (whole request)
LARGE_CONTEXT_TOKENS = 4000  # R-A5: above this the whole request is "large context"
AMBIGUOUS_TOKENS = (200, 800)  # R-A0 within this range (inclusive) is ambiguous: Phase B asks the SLM

# The order rules are tried in. Demanding rules come first so that a keyword of a cheap rule ("explain",
# "convert", "thanks") never hides a demanding one ("explain this architecture decision" is R-A5).
RULE_ORDER = ("R-A5", "R-A4", "R-A2", "R-A3", "R-A1")

# --- signals shared by several rules -----------------------------------------------------------------
# Something that is code: a fence, an inline code span, or a line that only code looks like.
CODE = re.compile(
    r"```"
    r"|`[^`\n]+`"
    r"|^[ \t]*(?:def|async[ \t]+def|fn|pub[ \t]+fn|func)[ \t]+\w+[ \t]*[(<]"
    r"|^[ \t]*class[ \t]+\w+[ \t]*[:({<]"
    r"|^[ \t]*(?:import[ \t]+[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*;?[ \t]*$|from[ \t]+[\w.]+[ \t]+import[ \t])"
    r"|^[ \t]*(?:const|let|var)[ \t]+\w+[ \t]*="
    r"|^[ \t]*function[ \t]*\w*[ \t]*\("
    r"|^[ \t]*#include[ \t]*[<\"]|^[ \t]*package[ \t]+[\w.]+;?[ \t]*$"
    r"|^[ \t]*(?:public|private|protected)[ \t]+(?:static[ \t]+)?[\w<>\[\]]+[ \t]+\w+[ \t]*\("
    r"|^[ \t]*SELECT[ \t].+[ \t]FROM[ \t]"
    r"|^.*[;{][ \t]*$"
    r"|^[ \t]*[\w.]+\(.*\)[ \t]*(?:\{|:)[ \t]*$"
    r"|=>|->[ \t]*[\w\[\]]+[ \t]*:|\w\[[\w\"']*\][ \t]*=[^=]",
    # Case-sensitive on purpose: code keywords are lower case, English sentences start upper case.
    # [ \t] rather than \s after ^: \s would run across newlines and make the search quadratic.
    re.MULTILINE,
)
# Words that make a question a programming question even without a code sample.
CODE_TOPIC = re.compile(
    r"(?<!\w)(?:c\+\+|c#)(?!\w)"
    r"|\b(?:python|javascript|typescript|java|rust|golang|ruby|php|kotlin|swift|bash|shell|sql"
    r"|git|docker|npm|pip|regex|json|yaml|api|function|method|class|variable|loop|list|dict(?:ionary)?"
    r"|array|string|integer|float|exception|error|compiler?|compile|syntax|code|script|library|module"
    r"|package|async|await|thread|pointer|recursion|closure|decorator|lambda|query|database|http)\b",
    re.IGNORECASE,
)
STACK_TRACE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^[ \t]*File \"[^\"\n]+\", line \d+"
    r"|^[ \t]+at [\w.$<>]+\([^\n()]*:\d+(?::\d+)?\)"
    r"|^[ \t]+at [^\n()]+ \([^\n()]+:\d+:\d+\)"
    r"|Exception in thread \""
    r"|^panic: |^goroutine \d+ \[|^error\[E\d{4}\]"
    r"|^[ \t]*\w+(?:\.\w+)*(?:Error|Exception): ",
    re.MULTILINE,
)

# --- R-A5 heavy reasoning or large context --------------------------------------------------------
HEAVY = re.compile(
    r"\barchitectur(?:e|al)\b"
    r"|\bdesign\s+(?:review|doc(?:ument)?)\b"
    r"|\b(?:review|critique|evaluate|assess)\s+(?:the|my|our|this|a)\s+(?:\w+\s+){0,2}(?:design|system)\b"
    r"|\bsystem\s+design\b"
    r"|\bdesign\s+(?:a|an|the)\s+(?:\w+\s+){0,3}(?:system|service|platform|pipeline|protocol|database\s+schema)\b"
    r"|\bsecurity\s+(?:audit|review)\b|\baudit\s+(?:\w+\s+){0,3}(?:security|vulnerabilit)"
    r"|\bthreat\s+model"
    r"|\bprove\b|\bproof\b"
    r"|\bmulti-?file\b|\bacross\s+(?:multiple|several|many|all(?:\s+the)?)\s+(?:\w+\s+)?files\b"
    r"|\bstep[- ]by[- ]step\b.{0,80}\b(?:plan|design|architect|migrat|system|roll-?out)"
    r"|\b(?:plan|design|architect|migrat\w*|roll-?out)\b.{0,80}\bstep[- ]by[- ]step\b",
    re.IGNORECASE | re.DOTALL,
)

# --- R-A4 code generation, debugging, refactoring -------------------------------------------------
CODE_WORK = re.compile(
    r"\bimplement(?:ing)?\b"
    r"|\bwrite\s+(?:me\s+)?(?:a|an|the|some)?\s*(?:[\w-]+\s+){0,3}?"
    r"(?:function|class|method|tests?|unit\s+tests?|script|program|module|endpoint|parser|component|cli)\b"
    r"|\brefactor\w*\b"
    r"|\bfix\s+(?:this|the|my|a|that)\s+(?:\w+\s+)?(?:bug|error|crash|failure|exception|test|code|issue)\b"
    r"|\bdebug(?:ging)?\b",
    re.IGNORECASE,
)

# --- R-A2 transform / format ----------------------------------------------------------------------
TRANSFORM = re.compile(
    r"\bconvert\w*\b|\breformat\w*\b|\bformat\s+(?:this|these|the|it|my|as)\b|\bpretty[- ]print\b"
    r"|\bextract\w*\b|\brename\b|\bsort\b|\bto\s+json\b|\bya?ml\b"
    r"|\b(?:regex|regexp|regular\s+expression)\s+(?:for|to|that)\b"
    r"|\btranslate\b.{1,200}?\b(?:to|into)\b",
    re.IGNORECASE | re.DOTALL,
)

# --- R-A3 explain / short code Q&A -----------------------------------------------------------------
EXPLAIN = re.compile(
    r"\bwhat\s+(?:does|do|is)\b|\bexplain\w*\b|\bwhy\b|\bhow\s+(?:do|can|should|would)\s+(?:i|you|we)\b"
    r"|\bwhat'?s\s+the\s+difference\b",
    re.IGNORECASE,
)

# --- R-A1 trivial chat ------------------------------------------------------------------------------
_ACK_WORDS = (
    r"hi|hello|hey|hiya|yo|howdy|greetings|good\s+(?:morning|afternoon|evening)|thanks|thank\s+you|thx|ty"
    r"|cheers|ok|okay|k|cool|great|nice|awesome|perfect|got\s+it|sounds\s+good|bye|goodbye|see\s+you"
    r"|yes|no|sure|lol|np|no\s+problem|that\s+(?:worked|works|helps|helped)|it\s+works|much\s+appreciated"
    r"|how\s+are\s+you(?:\s+doing)?(?:\s+today)?|what'?s\s+up|there|very\s+much|a\s+lot|so\s+much"
)
GREETING = re.compile(rf"^\W*(?:(?:{_ACK_WORDS})\b[\s!.,?:;)(-]*)+(?:\w+\W*)?$", re.IGNORECASE)
QUESTION = re.compile(
    r"\?\s*$|^[ \t]*(?:what|who|whom|whose|when|where|which|why|how|is|are|was|were|do|does|did|can|could"
    r"|should|would|will|name)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Classification:
    task_type: str  # chat | transform | code_explain | code_complex | reasoning_heavy | general
    rule_id: str  # R-A0..R-A5 (R-B1 when the Phase B classifier overrode the heuristic)
    ceiling: str  # the tier the rules say the task needs: L3 | L4 | L5 | L6
    tokens: int  # estimate for the whole request (messages + tools)
    ambiguous: bool  # default rule in the ambiguous size band: Phase B may ask the local model


RULE_OUTCOME: dict[str, tuple[str, str]] = {
    "R-A0": ("general", "L3"),
    "R-A1": ("chat", "L3"),
    "R-A2": ("transform", "L3"),
    "R-A3": ("code_explain", "L3"),
    "R-A4": ("code_complex", "L4"),
    "R-A5": ("reasoning_heavy", "L6"),
}


def last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text()
    return ""


def _has_code(text: str) -> bool:
    return bool(CODE.search(text) or STACK_TRACE.search(text))


def _matches(rule_id: str, text: str, tokens: int) -> bool:
    small = tokens < SMALL_INPUT_TOKENS
    if rule_id == "R-A5":
        return tokens > LARGE_CONTEXT_TOKENS or bool(HEAVY.search(text))
    if rule_id == "R-A4":
        return bool(CODE_WORK.search(text) or STACK_TRACE.search(text)) or (not small and _has_code(text))
    if rule_id == "R-A2":
        return small and bool(TRANSFORM.search(text))
    if rule_id == "R-A3":
        return small and (_has_code(text) or bool(CODE_TOPIC.search(text) and EXPLAIN.search(text)))
    if rule_id == "R-A1":
        # Acks and questions alike must be short; the length test also keeps the regexes off big texts.
        if estimate_text_tokens(text) >= SHORT_QUESTION_TOKENS:
            return False
        return bool(GREETING.match(text)) or (not _has_code(text) and bool(QUESTION.search(text)))
    raise ValueError(f"unknown rule {rule_id}")


def classify(request: ChatRequest) -> Classification:
    """Classify on the last user message's text and the whole request's token estimate.

    Agent turns go through the same rules: their last user message is the task the agent is working on.
    """
    text = last_user_text(request).strip()
    tokens = estimate_request_tokens(request)
    rule_id = next((r for r in RULE_ORDER if _matches(r, text, tokens)), "R-A0")
    task_type, ceiling = RULE_OUTCOME[rule_id]
    low, high = AMBIGUOUS_TOKENS
    ambiguous = rule_id == "R-A0" and low <= tokens <= high
    return Classification(task_type, rule_id, ceiling, tokens, ambiguous)
