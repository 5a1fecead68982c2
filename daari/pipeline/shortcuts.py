"""Shortcut tiers: answers found before any model runs (CCS, L1 semantic cache, L2 rules, Lt local tools).

What a tier is given (`ShortcutQuery`) and returns (`ShortcutResult`). Each tier plugs into the pipeline as a
`ShortcutStep` (steps/shortcut.py), which applies the rule that matters for agents, once: an agent turn is never
answered by a shortcut tier (ADR-0004), except through the agent-prefix L1 when that tier says it supports it. A
stale or approximate answer to a tool loop would break it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from daari.protocol.chat import ChatRequest, Completion

# Routing spec steps 4-8: the command context store, the semantic cache, rules (L2-dev and L2), tools.
SHORTCUT_ORDER = ("CCS", "L1", "L2", "Lt")


@dataclass(frozen=True)
class ShortcutQuery:
    """What a shortcut tier may look at: the parsed request, its headers, its L0 key and cache partition."""

    request: ChatRequest
    headers: Mapping[str, str]  # lower-cased request headers (X-Daari-Repo, X-Daari-Confirm-Tool, ...)
    l0_key: str  # "" when the cache is off for this request
    partition: str = ""  # credential partition of the cache ("" for no credential)
    agent_turn: bool = False
    task_type: str | None = None  # the heuristic classification's (L1's learned bars are per task type)


@dataclass(frozen=True)
class ShortcutResult:
    """A tier's answer with its own judgement, or (completion None) why it declined, for daari_meta.

    `details` is merged into daari_meta as-is (for example `similarity`, `verified_by`, `entry_id` for
    L1, `tool` for Lt, `confirmation_required`), so a tier reports what it did in its own words.
    """

    tier: str
    completion: Completion | None
    confidence: float = 1.0
    task_type: str | None = None  # "cache_hit", "rule", "tool"
    rule_id: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    draft: str | None = None  # a near-miss's answer for the model tiers (L1 with cache.l1.draft_injection)
    cache_hit: bool = False  # served from a cache (L1): `daari_meta.cache_hit`, `cache: "hit"`, `X-Daari-Cache: hit`

    @property
    def answered(self) -> bool:
        return self.completion is not None


class ShortcutTier(Protocol):
    """One shortcut tier. `answer` returns None (or a declined result) to let the request go on."""

    name: str
    serves_agent_turns: bool  # only the agent-prefix L1 may say True

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None: ...


def final_user_text(request: ChatRequest) -> str | None:
    """The text of the last message when it is the user's (the only message a rule or tool tier looks at)."""
    if not request.messages or request.messages[-1].role != "user":
        return None
    return request.messages[-1].text()


def shortcut_tiers(agent_turn: bool, registered: Mapping[str, ShortcutTier] | None = None) -> tuple[str, ...]:
    """The shortcut tiers a request may be answered by, in pipeline order."""
    if not agent_turn:
        return SHORTCUT_ORDER
    registered = registered or {}
    return tuple(t for t in SHORTCUT_ORDER if t in registered and registered[t].serves_agent_turns)
