"""Answers that went wrong whatever was asked: runaway repetition, and a short answer that copies the prompt.

A small model that loses its way repeats a line or a phrase until max_tokens ("# diffs:\\n#\\n#\\n#..." was
SmolLM2's 512-token commit message), or hands back a span of the conversation it was asked to summarise.
"""

from __future__ import annotations

import operator
import re
import zlib
from collections.abc import Callable, Container

import numpy as np

LINE_RUN = 5  # the same line (with letters) this many times in a row
SYMBOL_LINE_RUN = 8  # ...or a line of symbols only ("#", "-", "}" can repeat a little in real text)
PHRASE_RUN = 4  # a phrase of 2-8 words repeated back to back this many times
WORD_RUN = 6  # one word repeated back to back
MIN_RUN_TOKENS = 10  # and the repetition covers at least this many words
COMPRESS_MIN_CHARS = 400
COMPRESS_MAX_RATIO = 0.08  # prose compresses to ~0.4, code to ~0.3; a loop of the same text to almost nothing
ECHO_MIN_WORDS = 8  # a copied span of at least this many words...
ECHO_MIN_SHARE = 0.7  # ...making up at least this share of the answer
_WORD = re.compile(r"[\w'’-]+")


def _has_letter(text: str) -> bool:
    """`any(c.isalpha() for c in text)`, without a generator for a short text that usually starts with one."""
    for char in text:
        if char.isalpha():
            return True
    return False


def _longest_line_run(lines: list[str]) -> tuple[int, str]:
    best, best_line, run = 0, "", 0
    for i, line in enumerate(lines):
        run = run + 1 if i and line == lines[i - 1] else 1
        if run > best:
            best, best_line = run, line
    return best, best_line


# From this many words, the words are compared as numbered arrays (numpy): a fixed ~15 us, then ~10 ns a word;
# below it, word by word in C (`map(operator.eq)`), ~40 ns a word and no fixed cost.
ARRAY_FROM_WORDS = 64


class LazyPrompt:
    """The prompt an answer is checked against, read only when a check needs it: `text` as given, `in` on its
    folded form (lower case, single spaces). Most answers repeat nothing, and the prompt may be a whole agent
    conversation (200,000 characters to join and fold: milliseconds) that no check would have looked at."""

    __slots__ = ("_folded", "_source", "_text")

    def __init__(self, source: Callable[[], str]) -> None:
        self._source = source
        self._text: str | None = None
        self._folded: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._source()
        return self._text

    def __contains__(self, needle: object) -> bool:
        if self._folded is None:
            self._folded = " ".join(self.text.lower().split())
        return isinstance(needle, str) and needle in self._folded


# Per unit size: the repeats a run needs, and the span of matching positions that makes one.
_UNITS = tuple((size, needed, max((needed - 1) * size, MIN_RUN_TOKENS - size))
               for size in range(1, 9) for needed in (WORD_RUN if size == 1 else PHRASE_RUN,))


def _phrase_run(tokens: list[str], prompt: Container[str]) -> bool:
    """A unit of 1-8 words repeated back to back: a unit of n words repeated r times is a stretch of (r - 1) * n
    positions where each word equals the word n further on. A run the prompt has too is copied material, not a
    loop.

    Per n, which positions match is one byte each (`matches`), compared in C, and the stretches long enough are
    found with `bytes.find`: a Python loop over every word, eight times, was ~0.8 us a word on these cores (~320 us
    for a 400-word answer, in the judge of every answer)."""
    if len(set(tokens)) == len(tokens):
        return False  # no word comes twice: no position can match another (most short answers)
    codes = None
    if len(tokens) >= ARRAY_FROM_WORDS:
        first: dict[str, int] = {}  # the same word, the same number: the index where it first occurs
        codes = np.fromiter(map(first.setdefault, tokens, range(len(tokens))), dtype=np.int64, count=len(tokens))
    for size, needed, span in _UNITS:
        if len(tokens) - size < span:
            continue  # fewer positions to compare than the run needs
        # matches[i]: tokens[i] == tokens[i + size]; `span` ones ending at i are a repeated unit ending at i
        matches = ((codes[:-size] == codes[size:]).tobytes() if codes is not None
                   else bytes(map(operator.eq, tokens, tokens[size:])))
        stretch = b"\x01" * span
        start = matches.find(stretch)
        while start >= 0:
            i = start + span - 1
            unit = tokens[i + 1 - size:i + 1]
            if _has_letter("".join(unit)) and " ".join(unit * needed) not in prompt:
                return True
            start = matches.find(stretch, start + 1)
    return False


def runaway_repetition(text: str, prompt: str | LazyPrompt = "") -> bool:
    """The answer loops: a line, a phrase or the whole text over and over. Repetition that the prompt has too
    (an answer that quotes repeated data or code it was given) does not count; the prompt is read (and folded)
    only when the answer has a run."""
    folded = prompt if isinstance(prompt, LazyPrompt) else LazyPrompt(lambda: prompt)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    run, line = _longest_line_run(lines)
    needed = LINE_RUN if _has_letter(line) else SYMBOL_LINE_RUN
    if run >= needed and " ".join([" ".join(line.lower().split())] * needed) not in folded:
        return True
    if len(text) >= COMPRESS_MIN_CHARS and len(zlib.compress(text.encode())) / len(text.encode()) < COMPRESS_MAX_RATIO:
        middle = " ".join(text[len(text) // 2:len(text) // 2 + 200].lower().split()[1:-1])
        if middle not in folded:
            return True
    return _phrase_run(text.lower().split()[:2000], folded)


def copied_span(answer: str, prompt: str) -> int:
    """The longest run of the answer's words that appears, in order and unbroken, in the prompt."""
    words = [w.lower() for w in _WORD.findall(answer)]
    source = [w.lower() for w in _WORD.findall(prompt)]
    positions: dict[str, list[int]] = {}
    for i, word in enumerate(source):
        positions.setdefault(word, []).append(i)
    best = 0
    for i, word in enumerate(words):
        for j in positions.get(word, ()):
            length = 1
            while i + length < len(words) and j + length < len(source) and words[i + length] == source[j + length]:
                length += 1
            best = max(best, length)
    return best


def mostly_echo(answer: str, prompt: str) -> bool:
    """A short answer that is mostly a verbatim span of the prompt (a title that copies the conversation)."""
    words = len(_WORD.findall(answer))
    if words < ECHO_MIN_WORDS:
        return False
    span = copied_span(answer, prompt)
    return span >= ECHO_MIN_WORDS and span >= ECHO_MIN_SHARE * words
