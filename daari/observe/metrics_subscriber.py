"""Decision metrics for people watching daari: requests by client, cache lookups per level, escalation
paths and the estimated cost saved. A decision hub subscriber (its own bounded subscription)."""

from __future__ import annotations

from daari.config import PricingConfig
from daari.metrics import Metrics
from daari.observe.decision_row import l1_verdict
from daari.pipeline.decision import RoutingDecision
from daari.pricing import estimate_cost, frontier_cost


class ObservedMetrics:
    def __init__(self, metrics: Metrics, pricing: PricingConfig) -> None:
        self.metrics = metrics
        self.pricing = pricing

    def observe(self, decision: RoutingDecision) -> None:
        if decision.error is not None or decision.tier is None:
            return
        tier = decision.tier
        self.metrics.inc("requests_by_client_total", tier=tier, protocol=decision.protocol, client=decision.client)
        if decision.cache in ("hit", "miss"):
            self.metrics.inc("cache_lookups_total", level="L0", result="hit" if tier == "L0" else "miss")
            if tier != "L0" and (tier == "L1" or l1_verdict(decision.details) is not None):
                self.metrics.inc("cache_lookups_total", level="L1", result="hit" if tier == "L1" else "miss")
        if decision.escalated_from:
            self.metrics.inc("escalations_by_path_total", path=">".join((*decision.escalated_from, tier)))
        prompt, completion = decision.prompt_tokens or 0, decision.completion_tokens or 0
        cost = estimate_cost(self.pricing, tier, decision.model, prompt, completion)
        if cost > 0:  # most answers are free (caches, rules, local tiers): skip the counter's label lookup
            self.metrics.inc("cost_usd_total", cost, tier=tier)
        saved = frontier_cost(self.pricing, prompt, completion) - cost
        if saved > 0:
            self.metrics.inc("cost_saved_usd_total", saved)
