"""What a prompt states about its answer's format: one line, N words, under N characters, reply only with,
JSON (or a schema), a fixed prefix list, a language, a code fence required or forbidden (docs/routing.md).

Read from the instructions, not from the material they frame: the system prompt (when it is short enough to
be a task, not an agent's manual), the last user message minus what it quotes (code, diffs, transcripts,
tagged blocks, examples), and the request's structured-output fields (`response_format`, `output_config`).
Pure functions: the same request always gives the same `StatedFormat`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from daari.protocol.chat import ChatRequest
from daari.routing.folded import contains_any
from daari.trust.language import LANGUAGES

SYSTEM_SCAN_CHARS = 6000  # a longer system prompt is an agent's manual: its rules are not this answer's format
USER_WHOLE_CHARS = 1200  # a user message this short (once quoted material is gone) is read whole
USER_FRAME_CHARS = 600  # a longer one: instructions lead or trail the material they frame

JsonNeed = Literal["bare", "contains"]
Fence = Literal["required", "forbidden"]
NameCase = Literal["kebab", "snake", "camel", "pascal"]


@dataclass(frozen=True)
class JsonKey:
    name: str
    types: tuple[str, ...] = ()  # JSON types it may have ("string", "boolean", "null"...); empty: any
    enum: tuple[Any, ...] = ()  # the values it may have (a schema's `enum`); empty: any
    null_unless: str | None = None  # "(string, or null if isNewTopic is false)": null when that flag is false


@dataclass(frozen=True)
class StatedFormat:
    """Every constraint a prompt stated about its answer; the defaults state nothing."""

    one_line: bool = False
    max_lines: int | None = None
    per_line: bool = False  # "one per line": a list's items each on a line of their own
    min_lines: int | None = None  # "list three ..., one per line": at least as many lines as items asked
    min_words: int | None = None
    max_words: int | None = None
    max_chars: int | None = None
    max_sentences: int | None = None
    only: bool = False  # "reply only with ...", "nothing else", "no explanation"
    json: JsonNeed | None = None  # bare: the answer is JSON; contains: the answer holds JSON somewhere
    json_keys: tuple[JsonKey, ...] = ()
    json_exact_keys: bool = False  # "a single "title" field", additionalProperties: false
    prefixes: tuple[str, ...] = ()  # allowed `<type>:` values; with `prefix_shape` and none: any word
    prefix_shape: bool = False  # the answer starts `<type>[(scope)][!]: <description>`
    starts_with: str | None = None  # 'Start the summary with "I asked you..."'
    keeps_question: bool = False  # "if the conversation ends with a question, preserve that exact question"
    language: str | None = None  # a name of language.LANGUAGES, or "same" (as the user's message)
    fence: Fence | None = None
    imperative: bool = False  # "imperative mood": the description starts with a verb's base form
    sentence_case: bool = False  # "use sentence case": not Every Word Capitalized
    no_quotes: bool = False  # "without quotes"
    name_case: NameCase | None = None  # "in kebab-case": the answer is one name written that way
    found: tuple[str, ...] = field(default=(), compare=False)  # the phrases read, for docs and debugging

    @property
    def stated(self) -> bool:
        # NOTHING by identity first: most prompts state nothing, and building a StatedFormat to compare with
        # (23 fields set through object.__setattr__) cost ~10 us in the judge of every answer.
        return self is not NOTHING and self != NOTHING

    @property
    def short_form(self) -> bool:
        """The answer is meant to be short: a line, a few words or sentences, a bounded length, a JSON value."""
        return (self.one_line or self.max_chars is not None or self.max_words is not None or self.name_case is not None
                or self.prefix_shape or (self.max_lines is not None and self.max_lines <= 5)
                or (self.max_sentences is not None and self.max_sentences <= 3) or self.json == "bare")

    def merge(self, other: StatedFormat) -> StatedFormat:
        """Both sets of constraints; where both bound the same thing, the tighter bound."""
        def low(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else min(a, b)

        def high(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else max(a, b)

        if other is NOTHING:  # most prompts state nothing: no new object for them
            return self
        if self is NOTHING:
            return other
        json_need: JsonNeed | None = "bare" if "bare" in (self.json, other.json) else (self.json or other.json)
        return StatedFormat(
            one_line=self.one_line or other.one_line, max_lines=low(self.max_lines, other.max_lines),
            per_line=self.per_line or other.per_line, min_lines=high(self.min_lines, other.min_lines),
            min_words=high(self.min_words, other.min_words), max_words=low(self.max_words, other.max_words),
            max_chars=low(self.max_chars, other.max_chars),
            max_sentences=low(self.max_sentences, other.max_sentences), only=self.only or other.only,
            json=json_need, json_keys=_merge_keys(self.json_keys, other.json_keys),
            json_exact_keys=self.json_exact_keys or other.json_exact_keys,
            prefixes=self.prefixes or other.prefixes, prefix_shape=self.prefix_shape or other.prefix_shape,
            starts_with=self.starts_with or other.starts_with,
            keeps_question=self.keeps_question or other.keeps_question, language=self.language or other.language,
            fence=self.fence or other.fence, imperative=self.imperative or other.imperative,
            sentence_case=self.sentence_case or other.sentence_case, no_quotes=self.no_quotes or other.no_quotes,
            name_case=self.name_case or other.name_case,
            found=self.found + other.found)


NOTHING = StatedFormat()  # what a prompt that states nothing states (shared: `merge` passes it by identity)


def _merge_keys(first: tuple[JsonKey, ...], second: tuple[JsonKey, ...]) -> tuple[JsonKey, ...]:
    """Keys named by both, once each; a key's types from whichever names them (a schema does, prose may not)."""
    merged: dict[str, JsonKey] = {}
    for key in (*first, *second):
        if key.name not in merged or (key.types and not merged[key.name].types):
            merged[key.name] = key
    return tuple(merged.values())


# ---- numbers -------------------------------------------------------------------------------------------
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "a": 1,
                 "single": 1}
NUM = r"(\d{1,4}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty)"
DASH = r"\s*(?:-|–|—|to)\s*"
# "under N" is read as "at most N": the one unit between the two is not worth rejecting an answer for.
UPPER = (r"(?:at\s+most|no\s+more\s+than|not\s+more\s+than|no\s+longer\s+than|under|fewer\s+than|less\s+than"
         r"|maximum(?:\s+of)?|max\.?|up\s+to|within|shorter\s+than|≤|<=|(?:does\s+not|doesn'?t|do\s+not|must\s+not"
         r"|should\s+not|shouldn'?t|never|not\s+to)\s+exceed(?:ing)?|not\s+exceeding|exceed(?:ing)?|limit(?:ed)?\s+to)")


def _int(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBER_WORDS[text.lower()]


# ---- the phrases ---------------------------------------------------------------------------------------
_I = re.IGNORECASE
OUTPUT_NOUN = (r"(?:title|name|message|summary|answer|reply|response|output|description|subject|headline|label"
               r"|caption|tagline|sentence|result|text|topic|slug|translation)")
CODE_NOUN = r"(?:command|function|script|regex|expression|lambda|program|code|snippet|query|shell|bash|liner)"
WORD_RANGE = re.compile(rf"\b{NUM}{DASH}{NUM}[\s-]+words?\b|\bbetween\s+{NUM}\s+and\s+{NUM}\s+words\b", _I)
WORD_MAX = re.compile(rf"(?:{UPPER})\s*{NUM}\s+words?\b|\b{NUM}\s+words?\s+or\s+(?:less|fewer)\b"
                      rf"|\b{NUM}\s+words?\s+max(?:imum)?\b", _I)
WORD_EXACT = re.compile(rf"\bexactly\s+{NUM}\s+words?\b|\b(?:in|with|using)\s+{NUM}\s+words?\b"
                        rf"|\b(?:one|a\s+single|single)[\s-]word\b", _I)
CHAR_MAX = re.compile(rf"(?:{UPPER})\s*(\d{{1,4}})\s*(?:characters?|chars?)\b"
                      r"|\b(\d{1,4})\s*(?:characters?|chars?)\s+(?:or\s+(?:less|fewer)|max(?:imum)?|long\s+at\s+most)\b"
                      r"|≤\s*(\d{1,4})\s*(?:characters?|chars?)", _I)
ONE_LINE = re.compile(rf"\b(?:one|single|1)[\s-]line\b(?!\s*{CODE_NOUN})(?!r)"
                      rf"|\b(?:on|in)\s+(?:one|a\s+single)\s+line\b|\bsingle\s+line\b(?!\s*{CODE_NOUN})", _I)
# "one per line", "each on its own line", "on separate lines"; the item count from "list three ...", "name 5 ...".
PER_LINE = re.compile(r"\b(?:one|each)\s+(?:\w+\s+)?per\s+line\b|\beach\s+(?:\w+\s+)?on\s+(?:a\s+|its\s+own\s+)"
                      r"(?:separate\s+|new\s+)?line\b|\bon\s+(?:separate|individual|their\s+own)\s+lines\b", _I)
ITEM_COUNT = re.compile(r"\b(?:list|name|give|write|suggest|provide|return|output|print|generate|show|propose"
                        r"|enumerate)\s+(?:me\s+)?(?:the\s+)?(?:top\s+|first\s+)?"
                        rf"{NUM}\s+(?!per\b|of\s+(?:these|them|the)\b)[a-z]", _I)
LINES_MAX = re.compile(rf"(?:{UPPER})\s*{NUM}\s+lines?\b|\b{NUM}\s+lines?\s+or\s+(?:less|fewer)\b", _I)
SENTENCES = re.compile(rf"\b{NUM}{DASH}{NUM}\s+sentences?\b|(?:{UPPER})\s*{NUM}\s+sentences?\b"
                       rf"|\b(?:in\s+)?(?:one|a\s+single|single)\s+sentence\b|\b{NUM}\s+sentences?\s+or\s+(?:less|fewer)\b",
                       _I)
ONLY = re.compile(
    r"\b(?:reply|respond|answer|return|output|print|give|provide|write|generate|include)\w*\s+(?:me\s+)?(?:with\s+)?"
    rf"(?:only|just|solely|exclusively)\s+(?:with\s+)?(?:the\s+|a\s+|an\s+|your\s+|one\s+|valid\s+|raw\s+)?"
    rf"(?:[\w-]+\s+){{0,3}}?(?:{OUTPUT_NOUN}|json|code|command|word|number|list|object|value|line|commit|diff|sql"
    r"|digit|letter|yes|no|these\s+fields|the\s+json)s?\b"
    r"|\b(?:reply|respond|answer)\w*\s+(?:only|just|solely)\s+with\s+(?:the|a|an|your|one)\s+[\w-]+"
    r"|\bnothing\s+else\b|\bno\s+other\s+(?:text|output|words|content|commentary)\b"
    r"|\bwithout\s+(?:any\s+)?(?:additional|extra|other|further)\s+(?:text|commentary|explanations?|words|output)"
    r"|\bno\s+(?:explanations?|preamble|commentary|extra\s+text|additional\s+text)\b"
    r"|\bwithout\s+(?:any\s+)?(?:explanations?|commentary|preamble)\b"
    r"|\b(?:do\s+not|don'?t|never)\s+(?:explain|add\s+(?:any\s+)?(?:explanations?|commentary|notes?))\b"
    rf"|\b(?:output|return|generate|reply\s+with|respond\s+with)\s+only\b|\bonly\s+(?:output|return|generate)\b"
    rf"|\bjust\s+the\s+{OUTPUT_NOUN}\b",
    _I)
JSON_ASK = re.compile(
    r"\b(?:return|respond|reply|output|answer|format|give|provide|produce|generate|write)\w*\b[^.\n]{0,60}?"
    r"\b(?:in|as|with|using)\s+(?:a\s+|an\s+|valid\s+|strict\s+|raw\s+|only\s+)*json\b"
    r"|\b(?:return|output|respond\s+with|reply\s+with|produce|generate|emit)\s+(?:only\s+)?(?:valid\s+)?json\b"
    r"|\bjson\s+only\b|^\s*(?:please\s+)?convert\b[^.\n]{0,80}\bto\s+json\b", _I)
# A quoted name called a field (or typed in parentheses), or a key of an example object: {"title": ...}.
JSON_FIELD = re.compile(r"[\"'`](\w{1,40})[\"'`]\s*(?:\(([^)]{0,80})\))?\s*(fields?|keys?|propert(?:y|ies))?"
                        r"|\{\s*[\"'](\w{1,40})[\"']\s*:", _I)
# "How do I convert a dict to JSON?" asks about JSON; it does not ask for an answer in JSON.
QUESTION = re.compile(r"^\s*(?:how|what|why|when|where|which|who|is|are|does|do|should|can\s+i|could\s+i)\b[^?]*\?\s*$",
                      _I)
JSON_SINGLE = re.compile(r"\b(?:a\s+single|one|only\s+(?:a|one))\s+[\"'`]?\w*[\"'`]?\s*(?:field|key|property)\b", _I)
TYPE_PLACEHOLDER = re.compile(r"<type>\s*(?:\[[^\]]*\]|\([^)]*\))?\s*!?:\s*<(?:description|subject|summary)>", _I)
TYPE_LIST = re.compile(r"(?:use\s+these\s+for\s+<type>\s*:|<type>\s+(?:is|must\s+be)\s+one\s+of\s*:?|\btypes\s*:)\s*"
                       r"((?:[a-z]+(?:\s*,\s*|\s+or\s+|\s*$|\s*\n))+)", _I)
# "Start the summary with "I asked you..."", not "avoid always starting with "Analyzing"".
STARTS_WITH = re.compile(
    rf"(?:^[\s*>-]*|\b(?:must|should|always|please)\s+)(?:start|begin)s?\s+(?:the\s+|your\s+)?(?:{OUTPUT_NOUN}\s+)?"
    rf"with\s+[\"“']([^\"”'\n]{{2,60}})[\"”']", _I)
LANGUAGE = re.compile(
    r"\b(?:is\s+written|written|write|writes|reply|respond|answer|output|generate|use)\w*\s+(?:\w+\s+){0,4}?in\s+"
    rf"({'|'.join(LANGUAGES)})\b|\breply\s+in\s+({'|'.join(LANGUAGES)})\b", _I)
# "If the conversation ends with an unanswered question to the user, preserve that exact question" (opencode's
# summary prompt): the conversation's closing question belongs in the answer.
KEEP_QUESTION = re.compile(r"\b(?:preserve|keep|include|retain|repeat|quote)s?\s+(?:that|the|this|any|its|such\s+a)?\s*"
                           r"(?:(?:exact|same|final|last|open|unanswered|closing|pending|verbatim)\s+)*question\b", _I)
# "Translate to German": the translation is the answer, so German is its language.
TRANSLATE_TO = re.compile(rf"\btranslat\w*\b[^.\n]{{0,60}}?\b(?:in)?to\s+({'|'.join(LANGUAGES)})\b", _I)
NAME_CASE = re.compile(r"\b(kebab|snake|camel|pascal)[\s_-]?case\b", _I)
SAME_LANGUAGE = re.compile(r"\bsame\s+language\s+as\s+(?:the\s+)?(?:user|conversation|input|question|original"
                           r"|message|request)|\bin\s+the\s+user'?s\s+language\b|\blanguage\s+of\s+the\s+user\b", _I)
FENCE_REQUIRED = re.compile(r"\b(?:in|inside|within|wrap\w*[^.\n]{0,40}?\bin|fenced\s+in|enclosed\s+in)\s+(?:a\s+)?"
                            r"(?:markdown\s+)?(?:(?:fenced\s+)?code\s+block|triple\s+backticks|```)", _I)
FENCE_FORBIDDEN = re.compile(
    r"\b(?:must\s+not|mustn'?t|do\s+not|don'?t|never|should\s+not)\s+(?:include|contain|use)\b[^.\n!]{0,30}?"
    r"\b(?:fenced|code\s+blocks?|code\s+fences?|backticks)\b"
    r"|\bno\s+markdown\b|\bwithout\s+(?:any\s+)?markdown\b|\b(?:do\s+not|don'?t|never)\s+(?:use\s+|include\s+)?(?:any\s+)?"
    r"(?:markdown|code\s+(?:fences?|blocks?)|backticks)\b|\b(?:no|without)\s+(?:code\s+(?:fences?|blocks?)|backticks)\b"
    r"|\bmust\s+not\s+include\s+```|\bplain\s+text\s+only\b|\bnot\s+in\s+a\s+code\s+block\b", _I)

IMPERATIVE = re.compile(r"\bimperative\s+(?:mood|tense|form|voice)\b", _I)
SENTENCE_CASE = re.compile(r"\bsentence[\s-]case\b", _I)
NO_QUOTES = re.compile(r"\bwithout\s+(?:any\s+)?(?:surrounding\s+)?quotes\b|\bno\s+(?:surrounding\s+)?quotes\b"
                       r"|\b(?:do\s+not|don'?t|never)\s+(?:use|add|wrap\s+\w+\s+in)\s+(?:any\s+)?quotes\b", _I)

# Material the instructions frame, never instructions themselves.
_FENCED = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_INLINE_FENCE = re.compile(r"```[^`\n]*```")  # "```...```" named in a sentence: kept as a word, not material
_TAGGED = re.compile(r"<(examples?|conversation|transcript|context|diff|code|file|document|input|history"
                     r"|system-reminder)\b[^>]*>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_ROLE_LINE = re.compile(r"^\s*(?:(?:user|human|assistant|claude|ai|system|bot|model)\s*:|#\s*(?:user|assistant)\s*$)",
                        re.IGNORECASE)
_DIFF_START = re.compile(r"^(?:diff --git |# Diffs:|--- a/|@@ -\d)", re.MULTILINE)
_DIFF_MARKS = ("diff --git ", "# Diffs:", "--- a/", "@@ -")  # what every _DIFF_START match holds


def strip_material(text: str) -> str:
    """The text without what it quotes: fenced code, tagged blocks, a diff (to the end: aider and `git diff`
    put it last), and a transcript (from its first `User:`/`Assistant:` line to the last paragraph)."""
    # Each pattern only where its literal can be: most instructions quote nothing, and five regex passes over
    # them were a third of reading a short prompt's stated format.
    if "```" in text or "~~~" in text:
        text = _FENCED.sub("\n", _INLINE_FENCE.sub(" code-fence ", text))
    if "<" in text:
        text = _TAGGED.sub("\n", text)
    text = text.replace("*", "")
    if contains_any(text, _DIFF_MARKS) and (diff := _DIFF_START.search(text)):
        text = text[:diff.start()]
    lines = text.splitlines()
    first_role = _first_role_line(lines) if ":" in text or "#" in text else None
    if first_role is not None:
        blanks = [i for i, line in enumerate(lines) if not line.strip() and i > first_role]
        last = lines[blanks[-1] + 1:] if blanks else []
        tail = last if last and not _ROLE_LINE.match(last[0]) else []
        lines = [*lines[:first_role], "", *tail]
    return "\n".join(lines).strip()


def _first_role_line(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        if _ROLE_LINE.match(line):
            return i
    return None


def user_instructions(request: ChatRequest) -> str:
    """The instructions of the last user message, or of the lead-in just before it when the last one is the
    material that lead-in introduced ("Generate a title for this conversation:" then the conversation)."""
    messages = request.messages
    index = len(messages) - 1  # the last user message, looked for from the end (a conversation's is near it)
    while index >= 0 and messages[index].role != "user":
        index -= 1
    if index < 0:
        return ""
    last = messages[index]
    before = messages[index - 1] if index > 0 else None
    if before is not None and before.role == "user" and before.text().rstrip().endswith(":"):
        return strip_material(before.text())
    text = strip_material(last.text())
    if len(text) <= USER_WHOLE_CHARS:
        return text
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    lead, tail = paragraphs[0], paragraphs[-1] if len(paragraphs) > 1 else ""
    return lead[:USER_FRAME_CHARS] + "\n\n" + tail[-USER_FRAME_CHARS:]


def _system_text(request: ChatRequest) -> str:
    system = "\n".join(m.text() for m in request.messages if m.role == "system")
    return "" if len(system) > SYSTEM_SCAN_CHARS else system


def system_instructions(request: ChatRequest) -> str:
    return strip_material(_system_text(request))


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_BREAK.split(text) if s.strip()]


# Cheap substring tests that gate each pattern: most sentences of a prompt state no format, and a regex
# search per pattern per sentence cost ~50 ms on a 6,000-character system prompt; with them, ~3 ms.
_ONLY_HINTS = ("only", "just", "nothing else", "no other", "without", "explanation", "preamble", "commentary",
               "explain", "solely", "exclusively", "no extra", "no additional")
_FENCE_HINTS = ("markdown", "code", "backtick", "```", "fence", "plain text")
_JSON_KEY_HINTS = ("json", "field", "key", "propert")
_CODE_TALK = re.compile(rf"\b{CODE_NOUN}s?\b", _I)
_OUTPUT_TALK = re.compile(rf"\b{OUTPUT_NOUN}\b", _I)
_FLAG_PHRASES = (("imperative", "imperative", IMPERATIVE), ("sentence_case", "case", SENTENCE_CASE),
                 ("no_quotes", "quote", NO_QUOTES))


def parse_instructions(text: str, source: Literal["system", "user"] = "user") -> StatedFormat:
    """The constraints instruction text states (pure; `read_stated_format` picks the text).

    A system prompt that asks for JSON defines the answer: it must be JSON. A user message asking for JSON
    ("Convert this YAML to JSON") is satisfied by JSON anywhere in the answer, unless it also says "only".
    """
    found: list[str] = []
    changes: dict[str, Any] = {}

    def note(name: str, match: re.Match[str]) -> None:
        found.append(f"{name}: {match.group(0).strip()}")

    for sentence in _sentences(text):
        low = sentence.lower()
        bounded = "line" in low or "char" in low
        code_talk = bounded and _CODE_TALK.search(sentence) is not None and _OUTPUT_TALK.search(sentence) is None
        question = ("json" in low or "in " in low) and QUESTION.match(sentence) is not None
        per_line = "line" in low and (m := PER_LINE.search(sentence)) is not None
        if per_line and m:
            changes["per_line"] = True
            note("per_line", m)
            if count := ITEM_COUNT.search(sentence):
                changes["min_lines"] = _int(count.group(1))
        if "line" in low and not code_talk:
            # "a one-line summary of each file, one per line": the one line is each item's, not the answer's
            if not per_line and (m := ONE_LINE.search(sentence)):
                changes["one_line"] = True
                note("one_line", m)
            if m := LINES_MAX.search(sentence):
                value = _int(next(g for g in m.groups() if g))
                changes["max_lines"] = min(value, changes.get("max_lines", value))
                note("max_lines", m)
        if "word" in low:
            _words(sentence, changes, note)
        if "char" in low and not code_talk and (m := CHAR_MAX.search(sentence)):
            value = int(next(g for g in m.groups() if g))
            changes["max_chars"] = min(value, changes.get("max_chars", value))
            note("max_chars", m)
        if "sentence" in low and (m := SENTENCES.search(sentence)):
            digits = [_int(g) for g in m.groups() if g]
            changes["max_sentences"] = max(digits) if digits else 1
            note("sentences", m)
        if contains_any(low, _ONLY_HINTS) and (m := ONLY.search(sentence)):
            changes["only"] = True
            note("only", m)
        if "json" in low and not question and (m := JSON_ASK.search(sentence)):
            changes["json"] = "bare" if source == "system" else changes.get("json", "contains")
            note("json", m)
        if contains_any(low, _JSON_KEY_HINTS):
            keys = _json_keys(sentence)
            if keys:
                known = {k.name for k in changes.get("json_keys", ())}
                changes["json_keys"] = (*changes.get("json_keys", ()), *(k for k in keys if k.name not in known))
                found.append(f"json_keys: {', '.join(k.name for k in keys)}")
            if JSON_SINGLE.search(sentence):
                changes["json_exact_keys"] = True
        if "question" in low and (m := KEEP_QUESTION.search(sentence)):
            changes["keeps_question"] = True
            note("keeps_question", m)
        if ("start" in low or "begin" in low) and (m := STARTS_WITH.search(sentence)):
            changes["starts_with"] = m.group(1).rstrip(".… ").strip()
            note("starts_with", m)
        if not question and contains_any(low, LANGUAGES) \
                and (m := LANGUAGE.search(sentence) or TRANSLATE_TO.search(sentence)):
            changes["language"] = next(g for g in m.groups() if g).lower()
            note("language", m)
        elif not question and "language" in low and (m := SAME_LANGUAGE.search(sentence)):
            changes["language"] = "same"
            note("language", m)
        if "case" in low and changes.get("only") and (m := NAME_CASE.search(sentence)):
            changes["name_case"] = m.group(1).lower()  # "reply only with the name in kebab-case"
            note("name_case", m)
        for name, hint, pattern in _FLAG_PHRASES:
            if hint in low and (m := pattern.search(sentence)):
                changes[name] = True
                note(name, m)
        if contains_any(low, _FENCE_HINTS):
            if m := FENCE_FORBIDDEN.search(sentence):
                changes["fence"] = "forbidden"
                note("fence", m)
            elif (m := FENCE_REQUIRED.search(sentence)) and changes.get("fence") != "forbidden":
                changes["fence"] = "required"
                note("fence", m)
    if "<type>" in text and (m := TYPE_PLACEHOLDER.search(text)):
        changes["prefix_shape"] = True
        note("prefix", m)
        if types := TYPE_LIST.search(text):
            changes["prefixes"] = _type_names(types.group(1))
    if changes.get("json") and changes.get("only"):
        changes["json"] = "bare"  # "Only include these fields, no other text": the answer is the JSON
    return StatedFormat(**changes, found=tuple(found)) if changes or found else NOTHING


def _type_names(listed: str) -> tuple[str, ...]:
    return tuple(t.lower() for t in re.findall(r"[a-z]+", listed, _I) if t.lower() not in ("or", "and", "etc"))


def _words(sentence: str, changes: dict[str, Any], note: Any) -> None:
    """Word bounds: a range, an upper bound, or "in N words" (read as about N: up to a fifth more)."""
    if m := WORD_RANGE.search(sentence):
        low, high = (_int(g) for g in m.groups() if g)
        changes["min_words"], changes["max_words"] = min(low, high), max(low, high)
    elif m := WORD_MAX.search(sentence):
        changes["max_words"] = _int(next(g for g in m.groups() if g))
    elif m := WORD_EXACT.search(sentence):
        digits = [_int(g) for g in m.groups() if g]
        if not digits:
            changes["max_words"] = 1
        elif m.group(0).lower().startswith("exactly"):
            changes["min_words"] = changes["max_words"] = digits[0]
        else:
            changes["max_words"] = digits[0] + digits[0] // 5
    else:
        return
    note("words", m)


_JSON_TYPES = {"boolean": "boolean", "bool": "boolean", "string": "string", "str": "string", "number": "number",
               "integer": "integer", "int": "integer", "array": "array", "list": "array", "object": "object",
               "null": "null"}


def _json_keys(sentence: str) -> tuple[JsonKey, ...]:
    keys: list[JsonKey] = []
    for match in JSON_FIELD.finditer(sentence):
        if match.group(4):
            keys.append(JsonKey(match.group(4)))
            continue
        name, detail, noun = match.group(1), match.group(2) or "", match.group(3)
        if not (detail or noun):
            continue  # a quoted word that is not named as a field
        types = tuple(dict.fromkeys(_JSON_TYPES[w] for w in re.findall(r"[a-z]+", detail.lower())
                                    if w in _JSON_TYPES))
        flag = re.search(r"\bnull\s+if\s+[\"'`]?(\w+)[\"'`]?\s+is\s+false\b", detail, _I)
        keys.append(JsonKey(name, types, null_unless=flag.group(1) if flag else None))
    return tuple(keys)


# ---- structured output fields --------------------------------------------------------------------------
def _schema_format(schema: Any) -> StatedFormat:
    if not isinstance(schema, dict):
        return StatedFormat(json="bare", fence="forbidden", found=("json: schema",))
    found_properties = schema.get("properties")
    properties: dict[str, Any] = found_properties if isinstance(found_properties, dict) else {}
    required = [k for k in schema.get("required") or [] if isinstance(k, str)]
    keys = []
    for name in required:
        spec = properties.get(name)
        kind = spec.get("type") if isinstance(spec, dict) else None
        kinds = tuple(kind) if isinstance(kind, list) else (kind,) if isinstance(kind, str) else ()
        enum = spec.get("enum") if isinstance(spec, dict) else None
        keys.append(JsonKey(name, tuple(k for k in kinds if k in _JSON_TYPES.values()),
                            tuple(enum) if isinstance(enum, list) else ()))
    # The API returns the JSON itself: a client parses the text as it comes, a fence around it breaks that.
    return StatedFormat(json="bare", fence="forbidden", json_keys=tuple(keys),
                        json_exact_keys=schema.get("additionalProperties") is False and bool(properties)
                        and set(properties) == set(required), found=("json: schema",))


def structured_output(request: ChatRequest) -> StatedFormat:
    """JSON required by `response_format` (OpenAI, and Responses' text.format) or `output_config` (Anthropic)."""
    response_format = request.sampling.get("response_format")
    if isinstance(response_format, dict):
        kind = response_format.get("type")
        if kind == "json_object":
            return StatedFormat(json="bare", fence="forbidden", found=("json: response_format",))
        if kind == "json_schema":
            inner = response_format.get("json_schema")
            schema = inner.get("schema") if isinstance(inner, dict) else response_format.get("schema")
            return _schema_format(schema)
    output_config = request.extra.get("output_config")
    if isinstance(output_config, dict):
        fmt = output_config.get("format")
        if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json"):
            return _schema_format(fmt.get("schema"))
    return NOTHING


@functools.lru_cache(maxsize=64)
def _system_stated(system: str) -> StatedFormat:
    """What a system prompt states, kept by its text: a client sends the same system prompt on every request (the
    regular expressions over it were a tenth of a pass-through request's CPU). At most 64 prompts of up to
    SYSTEM_SCAN_CHARS each."""
    return parse_instructions(strip_material(system), "system")


USER_CACHE_CHARS = 2 * USER_WHOLE_CHARS  # the instructions a last user message gives are kept up to this size


@functools.lru_cache(maxsize=64)
def _user_stated(instructions: str) -> StatedFormat:
    """What the last user message's instructions state, kept by their text as the system prompt's are: an agent's
    tool loop sends the same last user message on every turn of the loop (the tool results come after it), and
    the sentences' scans were a third of reading a short request's stated format. At most 64 texts of up to
    USER_CACHE_CHARS each (`user_instructions` frames a longer message to about that)."""
    return parse_instructions(instructions)


def read_stated_format(request: ChatRequest) -> StatedFormat:
    """Everything the request states about its answer: system prompt, last user message, structured output."""
    system = _system_text(request)
    instructions = user_instructions(request)
    user = _user_stated(instructions) if len(instructions) <= USER_CACHE_CHARS else parse_instructions(instructions)
    stated = _system_stated(system).merge(user)
    if not stated.prefix_shape and (placeholder := _system_placeholder(system)) is not None:
        # A system prompt may show the message's structure in a fence (aider's earlier commit prompt).
        shown, prefixes = placeholder
        stated = replace(stated, prefix_shape=True, found=(*stated.found, f"prefix: {shown}"), prefixes=prefixes)
    return stated.merge(structured_output(request))


@functools.lru_cache(maxsize=64)
def _system_placeholder(system: str) -> tuple[str, tuple[str, ...]] | None:
    """The `<type>: <description>` placeholder a system prompt shows (fenced or not) and the types it lists;
    kept by the prompt's text, as `_system_stated`."""
    if (m := TYPE_PLACEHOLDER.search(system)) is None:
        return None
    types = TYPE_LIST.search(system)
    return m.group(0), _type_names(types.group(1)) if types else ()
