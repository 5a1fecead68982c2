"""Shortcut tiers: answers found before any model runs (L1 semantic cache, L2 rules, Lt local tools).

The rule that matters for agents lives here, once: an agent turn is never answered by a shortcut tier.
A stale or approximate answer to a tool loop would break it; only an exact L0 hit or a real execution may
answer an agent turn (ADR-0004). The tiers themselves register a `Shortcut` when they land.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from daari.protocol.chat import ChatRequest, Completion

SHORTCUT_ORDER = ("L1", "L2", "Lt")

# Answers the request, or None to let it continue down the pipeline.
Shortcut = Callable[[ChatRequest], Awaitable[Completion | None]]


def shortcut_tiers(agent_turn: bool) -> tuple[str, ...]:
    """The shortcut tiers a request may be answered by, in pipeline order."""
    return () if agent_turn else SHORTCUT_ORDER
