"""Which tier a shadow sample asks, planned off the request path with the routing code the execute step uses
(routing/plan.py): for a cache hit, the first tier of the chain its stored classification plans (the tier that
would have answered without the cache); for a tier eval, the next configured tier above the one that answered.
A tier that spends the client's own key is never asked, nor (unless allowed) the in-process model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from daari.config import TIER_NAMES
from daari.routing.plan import plan_tiers, tier_rank

TIER_EVAL_LEVELS = ("L2", "L3", "L4")


@dataclass(frozen=True)
class TierFacts:
    kind: str  # executor kind: embedded, openai, ollama, anthropic
    forwards_client_key: bool


@dataclass(frozen=True)
class Planned:
    tier: str | None  # None: skip
    skip: str | None = None  # why: no_tier, forwarded_key, in_process_tier


def _check(tier: str, facts: Mapping[str, TierFacts], in_process: bool) -> Planned:
    fact = facts.get(tier)
    if fact is None:
        return Planned(None, "no_tier")
    if fact.forwards_client_key:
        return Planned(None, "forwarded_key")  # a shadow call has no client key to spend, and must not
    if fact.kind == "embedded" and not in_process:
        return Planned(None, "in_process_tier")
    return Planned(tier)


def cache_tier(ceiling: str | None, configured: Sequence[str], facts: Mapping[str, TierFacts], *,
               in_process: bool, override: str | None = None) -> Planned:
    """The tier a cache hit's request would have gone to first (the one it pinned with an override)."""
    if override is not None:
        return _check(override, facts, in_process) if override in configured else Planned(None, "no_tier")
    if not configured:
        return Planned(None, "no_tier")
    start = ceiling if ceiling in TIER_NAMES else configured[0]
    chain = plan_tiers(start, list(configured), None, escalation=True)
    return _check(chain[0], facts, in_process)


def next_tier_up(level: str, configured: Sequence[str], facts: Mapping[str, TierFacts], *,
                 in_process: bool) -> Planned:
    """The next configured tier above `level` (L2's is the first model tier)."""
    above = [t for t in configured if level not in TIER_NAMES or tier_rank(t) > tier_rank(level)]
    if not above:
        return Planned(None, "no_higher_tier")
    return _check(above[0], facts, in_process)
