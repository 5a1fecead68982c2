"""Cheap text scans for the per-request rules: case-insensitive regexes run as case-sensitive ones on the
lower-cased text where that finds the same matches, and substring gates as plain loops.

A regex compiled with IGNORECASE folds the case of every character it compares: 2-3x slower than the same
pattern lower-cased on `text.lower()` (~10-25 us for one of the classifier's rules on a 40-character prompt on
these cores, and a request runs a dozen such rules). The two agree on any text without "ſ", "ı" or "İ": under
IGNORECASE those match "s" and "i", which `lower()` does not give them ("İ" lowers to two characters); "K", the
Kelvin sign, lowers to "k" as re folds it. `lower_text` says which text may take the fast form.
"""

from __future__ import annotations

import re

FOLDS_TO_ASCII = ("ſ", "ı", "İ")


def lower_text(text: str) -> str | None:
    """`text.lower()` when the lower-cased patterns find in it what the case-insensitive ones find in `text`,
    else None (the caller runs the case-insensitive pattern)."""
    if not text.isascii():
        for char in FOLDS_TO_ASCII:
            if char in text:
                return None
    return text.lower()


def contains_any(text: str, needles: tuple[str, ...]) -> bool:
    """`any(needle in text for needle in needles)` as a loop: a generator and `any` cost ~1-3 us a call on these
    cores, several times the scans themselves on a short text, and the rules make dozens of such calls."""
    for needle in needles:
        if needle in text:
            return True
    return False


def contains_all_of_any(text: str, groups: tuple[tuple[str, ...], ...]) -> bool:
    """Whether `text` holds every needle of at least one group (as `contains_any`, a loop)."""
    for group in groups:
        for needle in group:
            if needle not in text:
                break
        else:
            return True
    return False


def lower_pattern(pattern: str) -> str:
    """The pattern with its literal letters lower-cased; escapes (`\\b`, `\\S`, `\\W`, `\\Z`) kept as written.
    For patterns without named groups or inline flags (whose spelling lowering would change)."""
    if "(?P" in pattern or re.search(r"\(\?[a-zA-Z]", pattern):
        raise ValueError("named groups and inline flags cannot be lower-cased")
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            out.append(pattern[i:i + 2])
            i += 2
        else:
            out.append(pattern[i].lower())
            i += 1
    return "".join(out)


class Folded:
    """One case-insensitive regex and its lower-cased twin. `found` answers "does it match" from the twin alone;
    `search` and `match` return the case-insensitive pattern's own match (its groups keep the text's case),
    asking it only when the twin matched."""

    __slots__ = ("hints", "lowered", "pattern")

    def __init__(self, pattern: re.Pattern[str], hints: tuple[str, ...] = ()) -> None:
        """`hints`: lower-case words of which every match holds at least one (none: no such gate); a text
        holding none of them is no match without running the regex."""
        if not pattern.flags & re.IGNORECASE:
            raise ValueError(f"not a case-insensitive pattern: {pattern.pattern!r}")
        self.pattern = pattern
        self.lowered = re.compile(lower_pattern(pattern.pattern), pattern.flags & ~re.IGNORECASE)
        self.hints = hints

    def found(self, text: str, lower: str | None) -> bool:
        """Whether `pattern.search(text)` matches; `lower` is `lower_text(text)`."""
        if lower is not None:
            if self.hints and not contains_any(lower, self.hints):
                return False
            return self.lowered.search(lower) is not None
        return self.pattern.search(text) is not None

    def search(self, text: str, lower: str | None) -> re.Match[str] | None:
        if lower is not None and self.lowered.search(lower) is None:
            return None
        return self.pattern.search(text)

    def match(self, text: str, lower: str | None) -> re.Match[str] | None:
        if lower is not None and self.lowered.match(lower) is None:
            return None
        return self.pattern.match(text)
