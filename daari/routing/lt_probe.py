"""The hybrid classifier's question to the Lt tier: does any tool pattern match this text? (routing spec, Phase B)

The Lt tier registers its matcher here at start; until one is registered the answer is "no match", so the
hybrid stage works with or without Lt. A probe must be pure and fast: it runs on every classified request.
"""

from __future__ import annotations

from collections.abc import Callable

LtMatcher = Callable[[str], bool]

_matchers: list[LtMatcher] = []


def register_lt_matcher(matcher: LtMatcher) -> None:
    """Add a matcher (called with the last user message's text; True when an Lt pattern matches it)."""
    if matcher not in _matchers:
        _matchers.append(matcher)


def unregister_lt_matcher(matcher: LtMatcher) -> None:
    if matcher in _matchers:
        _matchers.remove(matcher)


def lt_matches(text: str) -> bool:
    """Whether any registered Lt pattern matches `text`; False when no Lt tier registered a matcher."""
    return any(matcher(text) for matcher in _matchers)
