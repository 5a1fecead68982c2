"""The tier plan: which tiers a request may be executed on, in escalation order (routing spec step 10)."""

from __future__ import annotations

from daari.config import TIER_NAMES
from daari.errors import InvalidRequest

OVERRIDE_VALUES = ("L0", *TIER_NAMES)


def tier_rank(tier: str) -> int:
    return TIER_NAMES.index(tier)


def plan_tiers(ceiling: str, configured: list[str], override: str | None, escalation: bool) -> list[str]:
    """Start at the classified tier (or the highest configured below it), climb through the configured ones.

    An override pins exactly one tier. Without escalation only the first tier of the chain is tried.
    """
    if override is not None:
        if override not in configured:
            raise InvalidRequest(
                f"X-Daari-Tier-Override: tier {override} is not configured (configured: {', '.join(configured)})",
                param="X-Daari-Tier-Override",
            )
        return [override]
    chain = [t for t in configured if tier_rank(t) >= tier_rank(ceiling)]
    if not chain:
        chain = configured[-1:]
    return chain if escalation else chain[:1]
