"""An answer against the format its prompt stated: the names of the constraints it breaks (pure).

Violation names (docs/routing.md, "The stated format"): one_line, max_lines, word_count, char_count,
sentence_count, extra_text, quoted, json, json_keys, prefix, imperative, sentence_case, starts_with, language,
code_fence_missing, code_fence_forbidden, name_case, per_line, question_dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from daari.trust.closing_question import question_kept
from daari.trust.language import ENGLISH_ONLY, LANGUAGE_SCRIPT, breaks_language, same_language_broken
from daari.trust.stated_format import JsonKey, StatedFormat

_I = re.IGNORECASE
# A chatty opening where the prompt asked for the thing only.
LEAD_IN = re.compile(
    r"^\W*(?:sure|certainly|of\s+course|okay|ok|absolutely|great|here(?:'s|\s+is|\s+are)|below\s+is|i\s+(?:would|'d)"
    r"\s+suggest|the\s+(?:commit\s+message|title|summary|answer|result|name)\s+(?:is|would\s+be|could\s+be)"
    r"|(?:commit\s+message|title|summary|answer|subject|name|translation)\s*:|you\s+can\s+use|use\s+(?:this|the\s+"
    r"following)|the\s+following)", _I)
# Commentary after the thing itself: a paragraph or a parenthesis that talks about it.
TRAILING = re.compile(r"(?:\n\s*|\s\()(?:\(|\*+)?(?:note|explanation|this\s+(?:commit|title|message|change|summary|"
                      r"name|regex|is|translation|matches)|it\s+matches|i\s+hope|let\s+me\s+know|feel\s+free"
                      r"|alternatively|the\s+above)\b", _I)
# The description of a commit message in the past tense, a gerund, or the third person ("Added", "Adding", "Adds").
_NOT_ED = frozenset(("embed", "need", "feed", "seed", "speed", "shed", "proceed", "succeed", "exceed", "bed", "red"))
_NOT_ING = frozenset(("bring", "string", "ping", "ring", "sing", "thing", "spring", "swing", "king", "wing"))
_THIRD_PERSON = frozenset((
    "adds", "fixes", "updates", "removes", "renames", "refactors", "improves", "implements", "introduces",
    "changes", "makes", "moves", "bumps", "uses", "handles", "supports", "allows", "creates", "deletes",
    "replaces", "cleans", "extracts", "enables", "disables", "converts", "ensures", "prevents", "returns"))
MARKUP = re.compile(r"^(\*\*|__|\*|_)\S.*\S\1$", re.DOTALL)
PREFIX = re.compile(r"^([A-Za-z][\w-]*)(?:\([^)\n]*\))?!?:\s+\S")
FENCE = re.compile(r"```|~~~")
_FENCED_BLOCK = re.compile(r"^\s*(?:```|~~~)[\w+-]*[ \t]*\n(.*?)\n\s*(?:```|~~~)\s*$", re.DOTALL)
_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)
ENGLISH_VERBS = frozenset(("add", "fix", "update", "remove", "rename", "refactor", "bump", "improve", "handle",
                           "support", "allow", "create", "delete", "replace", "extract", "enable", "disable",
                           "implement", "introduce", "change", "move", "clean", "convert", "ensure", "prevent",
                           "return", "log", "use", "drop", "correct"))
_WORDISH = re.compile(r"[A-Za-z][\w'-]*")
_SENTENCE_END = re.compile(r"(\S*?)[.!?]+(?=[\"')\]]*(?:\s|$))")
_ABBREVIATIONS = frozenset(("e.g", "i.e", "etc", "vs", "mr", "dr", "no", "fig", "cf", "approx"))
# One name in the asked style; a branch may carry a "fix/" or "feature/" folder.
NAME_STYLES = {"kebab": re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*(?:/[a-z0-9]+(?:-[a-z0-9]+)*)*$"),
               "snake": re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$"),
               "camel": re.compile(r"^[a-z][A-Za-z0-9]*$"),
               "pascal": re.compile(r"^[A-Z][A-Za-z0-9]*$")}
_TITLE_FIELDS = ("title", "name", "summary", "message", "subject", "label", "description")
_MISSING = object()


def unquoted(text: str) -> str:
    """The answer without one pair of wrapping quotes or backticks (clients strip them: aider does)."""
    text = text.strip()
    for left, right in (('"', '"'), ("'", "'"), ("“", "”"), ("`", "`")):
        if len(text) >= 2 and text.startswith(left) and text.endswith(right) and left not in text[1:-1]:
            return text[1:-1].strip()
    return text


def parse_json(text: str, fmt: StatedFormat) -> Any:
    """The answer's JSON value, or _MISSING. `bare`: the answer is the JSON (one fence around it is unwrapped
    unless fences were forbidden); `contains`: the first JSON object or array anywhere in it."""
    text = text.strip()
    candidates = [text]
    fenced = _FENCED_BLOCK.match(text)
    if fenced and fmt.fence != "forbidden" and not fmt.only:  # "no other text": the fence is other text
        candidates.append(fenced.group(1))
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    if fmt.json != "contains":
        return _MISSING
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[{\[]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict | list):
            return value
    return _MISSING


def _type_ok(value: Any, types: tuple[str, ...]) -> bool:
    if not types:
        return True
    checks = {"string": isinstance(value, str), "boolean": isinstance(value, bool), "null": value is None,
              "number": isinstance(value, int | float) and not isinstance(value, bool),
              "integer": isinstance(value, int) and not isinstance(value, bool),
              "array": isinstance(value, list), "object": isinstance(value, dict)}
    return any(checks.get(t, True) for t in types)


def keys_broken(value: Any, keys: tuple[JsonKey, ...], exact: bool) -> bool:
    if not isinstance(value, dict):
        return True
    if any(k.name not in value or not _type_ok(value[k.name], k.types) for k in keys):
        return True
    if any(k.enum and value[k.name] not in k.enum for k in keys):
        return True
    if any(k.null_unless and value.get(k.null_unless) is False and value[k.name] is not None for k in keys):
        return True
    return exact and bool(keys) and set(value) != {k.name for k in keys}


def subject_of(text: str, value: Any) -> str | None:
    """What length bounds apply to: the answer, or the title-like string of a JSON answer ({"title": ...}).
    None when that field is null (a topic check that found no new topic)."""
    if value is _MISSING:
        return unquoted(text)
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        for name in _TITLE_FIELDS:
            if name in value:
                field = value[name]
                return field.strip() if isinstance(field, str) else None
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(strings) == 1:
            return strings[0].strip()
    return None


def count_words(text: str) -> int:
    return sum(1 for token in text.split() if any(c.isalnum() for c in token))


def count_sentences(text: str) -> int:
    """Sentences of prose (code left out): each line has at least one, a list item or a heading is one."""
    total = 0
    for line in _CODE.sub(" ", text).splitlines():
        line = line.strip()
        if not any(c.isalnum() for c in line):
            continue
        ends = sum(1 for m in _SENTENCE_END.finditer(line) if m.group(1).lower().lstrip("(\"'") not in _ABBREVIATIONS)
        total += ends + (0 if re.search(r"[.!?][\"')\]]*$", line) else 1)
    return total


def not_imperative(description: str) -> bool:
    words = _WORDISH.findall(description)
    if not words:
        return False
    word = words[0].lower()
    return ((word.endswith("ed") and len(word) >= 5 and word not in _NOT_ED)
            or (word.endswith("ing") and len(word) >= 6 and word not in _NOT_ING) or word in _THIRD_PERSON)


def title_cased(text: str) -> bool:
    """Every Word Capitalized where sentence case was asked (short words and the first word aside)."""
    words = [w for w in _WORDISH.findall(text)[1:] if len(w) > 3]
    if len(words) < 2:
        return False
    return sum(1 for w in words if w[0].isupper()) / len(words) >= 0.8


def format_violations(answer: str, fmt: StatedFormat, user_text: str = "",
                      closing_question: str | None = None) -> tuple[str, ...]:
    """The stated constraints `answer` breaks, in a fixed order; () when it meets them all (or none was stated).
    `closing_question` is the question the conversation ends on (closing_question.py), for `keeps_question`."""
    text = answer.strip()
    if not text or not fmt.stated:
        return ()
    out: list[str] = []
    value = parse_json(text, fmt) if fmt.json else _MISSING
    if fmt.json and value is _MISSING:
        out.append("json")
    elif (fmt.json_keys or fmt.json_exact_keys) and fmt.json == "bare" and keys_broken(value, fmt.json_keys,
                                                                                       fmt.json_exact_keys):
        out.append("json_keys")
    subject = None if fmt.json and value is _MISSING else subject_of(text, value if fmt.json == "bare" else _MISSING)
    if subject is not None:
        out.extend(_shape(subject, fmt))
    if fmt.max_lines is not None and sum(1 for line in text.splitlines() if line.strip()) > fmt.max_lines:
        out.append("max_lines")
    if fmt.per_line and _items_not_per_line(text, fmt.min_lines):
        out.append("per_line")
    if fmt.max_sentences is not None and fmt.json != "bare" and count_sentences(text) > fmt.max_sentences:
        out.append("sentence_count")
    if fmt.only and _extra_text(text, fmt):
        out.append("extra_text")
    if fmt.no_quotes and unquoted(text) != text:
        out.append("quoted")
    if fmt.name_case is not None and not NAME_STYLES[fmt.name_case].match(unquoted(text)):
        out.append("name_case")
    if fmt.language is not None and _wrong_language(text, value, fmt.language, user_text):
        out.append("language")
    if fmt.keeps_question and closing_question and not question_kept(text, closing_question):
        out.append("question_dropped")
    if fmt.fence == "required" and not FENCE.search(text):
        out.append("code_fence_missing")
    elif fmt.fence == "forbidden" and FENCE.search(text):
        out.append("code_fence_forbidden")
    return tuple(out)


def _items_not_per_line(text: str, min_lines: int | None) -> bool:
    """"One per line": fewer lines than the items asked for, or (no count stated) one line listing several."""
    lines = [line for line in text.splitlines() if line.strip() and not FENCE.match(line.strip())]
    if min_lines is not None:
        return len(lines) < min_lines
    return len(lines) == 1 and len([item for item in re.split(r"[,;]", lines[0]) if item.strip()]) >= 2


def _shape(subject: str, fmt: StatedFormat) -> list[str]:
    out = []
    if fmt.one_line and "\n" in subject.strip():
        out.append("one_line")
    words = count_words(subject)
    if (fmt.max_words is not None and words > fmt.max_words) or (fmt.min_words is not None and words < fmt.min_words):
        out.append("word_count")
    if fmt.max_chars is not None and len(subject) > fmt.max_chars:
        out.append("char_count")
    first_line = unquoted(subject.strip().splitlines()[0]) if subject.strip() else ""
    description = first_line
    if fmt.prefix_shape:
        match = PREFIX.match(first_line)
        if match is None or (fmt.prefixes and match.group(1).lower() not in fmt.prefixes):
            out.append("prefix")
        else:
            description = first_line[first_line.index(":") + 1:]
    if fmt.imperative and not_imperative(description):
        out.append("imperative")
    if fmt.sentence_case and title_cased(first_line):
        out.append("sentence_case")
    if fmt.starts_with and not unquoted(subject).lstrip("*_#> ").lower().startswith(fmt.starts_with.lower()):
        out.append("starts_with")
    return out


def _extra_text(text: str, fmt: StatedFormat) -> bool:
    """Something besides the thing asked for: a lead-in, trailing commentary, or a fence around a short answer."""
    if fmt.json == "bare":
        return False  # text around JSON makes it unparseable: reported as `json`
    if LEAD_IN.match(text) or TRAILING.search(text):
        return True
    short_text = fmt.one_line or fmt.max_words is not None or fmt.prefix_shape or fmt.max_chars is not None
    # A fence, emphasis or a heading around a short plain-text answer shows as its characters in a title,
    # a commit message or a name.
    return short_text and (text.startswith(("```", "~~~", "# ", "## ")) or MARKUP.match(text) is not None)


def english_verb(description: str, required: str) -> bool:
    """A commit description in another Latin language that still opens with an English verb ("add ... für")."""
    words = _WORDISH.findall(description)
    return (bool(words) and required not in ("english", "same") and LANGUAGE_SCRIPT.get(required) == "latin"
            and words[0].lower() in ENGLISH_ONLY | ENGLISH_VERBS)


def _wrong_language(text: str, value: Any, required: str, user_text: str) -> bool:
    subject = subject_of(text, value) or text
    if prefix := PREFIX.match(unquoted(subject)):  # a commit type ("fix:") is English in every language
        subject = unquoted(subject)[prefix.end(1):].lstrip("()!: ")
        if english_verb(subject, required):
            return True
    if required == "same":
        return same_language_broken(subject, user_text)
    return breaks_language(subject, required)
