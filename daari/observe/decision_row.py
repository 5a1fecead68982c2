"""A routing decision -> one decision-log row: flat columns, costs priced, no headers, prompt per policy."""

from __future__ import annotations

import json
from typing import Any

from daari.config import PricingConfig
from daari.observe.decision_log import COLUMNS, Values
from daari.pipeline.decision import AttemptRecord, RoutingDecision
from daari.pricing import AnswerCosts, PriceKey
from daari.sessions.economics import lost_cache_cost, rates_for


def l1_verdict(details: dict[str, Any]) -> str | None:
    """The L1 verifier's verdict as the report counts it: "accepted", "rejected", or None (L1 did not judge)."""
    verdict = details.get("verdict")
    if isinstance(verdict, str):
        return verdict
    if isinstance(verdict, dict) and "accepted" in verdict:
        return "accepted" if verdict["accepted"] else "rejected"
    if details.get("verified_by"):
        return "accepted"
    return None


def l1_outcome(details: dict[str, Any]) -> str | None:
    """What L1 reported when it did not serve (`daari_meta.l1`): "miss" (no candidate, or the context held no
    entry), "rejected", or why it did not look ("skipped_loading", "unavailable", "index_loading"); None: not asked,
    or an L1 hit (the tier says so)."""
    outcome = details.get("l1")
    return outcome if isinstance(outcome, str) else None


def l1_looked_up(details: dict[str, Any]) -> bool:
    """Whether L1 looked up a request it did not serve: a candidate judged, or a miss. Requests L1 skipped
    (loading, unavailable) are not lookups."""
    return l1_verdict(details) is not None or l1_outcome(details) == "miss"


class DecisionRows:
    """Decisions -> decision-log rows under one price table. Runs on the event loop for every decision (a
    batch at a time, each flush), so the common case (no details, no attempts) does no work it need not, and
    the costs of recent (tier, model, tokens) are remembered (`AnswerCosts`)."""

    def __init__(self, pricing: PricingConfig, remembered: int = 1024) -> None:
        self.pricing = pricing
        self.costs = AnswerCosts(pricing)
        # The priced columns of recent kinds, rounded once: `round(x, 8)` formats through a string, three per row.
        self.remembered = remembered
        self._priced: dict[PriceKey, tuple[float, float, float]] = {}

    def values(self, decision: RoutingDecision) -> Values:
        """The row's values in `COLUMNS` order (what the writer binds)."""
        prompt_tokens = decision.prompt_tokens or 0
        completion_tokens = decision.completion_tokens or 0
        tier = decision.tier
        if tier is None or decision.error is not None:
            priced = _UNPRICED
        else:
            key = (tier, decision.model, prompt_tokens, completion_tokens)
            found = self._priced.get(key)
            if found is None:
                if len(self._priced) >= self.remembered:
                    self._priced.clear()
                actual, at_l6 = self.costs(key)
                found = self._priced[key] = (round(actual, 8), round(at_l6, 8), round(at_l6 - actual, 8))
            priced = found
        details = decision.details
        similarity: float | None = None
        verdict: str | None = None
        project: str | None = None
        redacted = withheld = 0
        l1: str | None = None
        if details:
            found = details.get("similarity")
            similarity = float(found) if isinstance(found, int | float) else None
            verdict = l1_verdict(details)
            l1 = l1_outcome(details)
            project = details.get("project")
            redacted = int(details.get("redacted") or details.get("secrets_seen") or 0)
            withheld = int(details.get("withheld") or 0)
        return (
            decision.request_id, decision.time, decision.protocol, decision.client, decision.model_requested,
            int(decision.stream), tier, decision.task_type, decision.rule_id, decision.cache,
            tier if tier == "L0" or tier == "L1" else None, similarity, verdict,
            ",".join(decision.escalated_from) or None,
            attempts_json(decision.attempts) if decision.attempts else "[]",
            int(decision.agent_turn), decision.latency_ms, decision.ttft_ms, prompt_tokens, completion_tokens,
            *priced, decision.status, decision.error, decision.prompt_hash, decision.prompt, decision.session,
            decision.call_type, decision.cache_read_tokens, decision.cache_write_tokens, decision.affinity,
            self._lost(decision), project, redacted, withheld, l1,
        )

    def _lost(self, decision: RoutingDecision) -> float:
        """The price of the prompt tokens another tier held warm that this answer paid for in full."""
        if not decision.lost_cache_tokens or decision.tier is None:
            return 0.0
        return round(lost_cache_cost(rates_for(self.pricing, decision.tier, decision.model),
                                     decision.lost_cache_tokens), 8)


_UNPRICED = (0.0, 0.0, 0.0)  # refused, failed or abandoned: nothing was answered


def decision_values(decision: RoutingDecision, pricing: PricingConfig) -> Values:
    """One decision's row values in `COLUMNS` order (a writer keeps a `DecisionRows` instead)."""
    return DecisionRows(pricing).values(decision)


# `json.dumps` with any option builds a JSONEncoder per call: one, built once, gives the same text.
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def attempts_json(attempts: tuple[AttemptRecord, ...]) -> str:
    """The `attempts` column: the tiers tried, as compact JSON."""
    return _COMPACT.encode([a.to_json() for a in attempts])


def decision_row(decision: RoutingDecision, pricing: PricingConfig) -> dict[str, Any]:
    """The row as a dict of column -> value."""
    return dict(zip(COLUMNS, decision_values(decision, pricing), strict=True))
