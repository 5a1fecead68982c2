"""Decision metrics for people watching daari: requests by client, cache lookups per level, escalation
paths and the estimated cost saved. One of the decision hub's in-process handlers (attached, synchronous)."""

from __future__ import annotations

from daari.config import PricingConfig
from daari.metrics import Metrics
from daari.observe.decision_row import l1_verdict
from daari.pipeline.decision import RoutingDecision
from daari.pricing import answer_costs

# cache_lookups_total{level,result} label values, built once.
_L0_HIT, _L0_MISS, _L1_HIT, _L1_MISS = ("L0", "hit"), ("L0", "miss"), ("L1", "hit"), ("L1", "miss")
_NO_LABELS: tuple[str, ...] = ()


class ObservedMetrics:
    def __init__(self, metrics: Metrics, pricing: PricingConfig) -> None:
        self.pricing = pricing
        self.by_client = metrics.counter("requests_by_client_total", ("client", "protocol", "tier"))
        self.lookups = metrics.counter("cache_lookups_total", ("level", "result"))
        self.escalations = metrics.counter("escalations_by_path_total", ("path",))
        self.cost = metrics.counter("cost_usd_total", ("tier",))
        self.saved = metrics.counter("cost_saved_usd_total")

    def observe(self, decision: RoutingDecision) -> None:
        tier = decision.tier
        if decision.error is not None or tier is None:
            return
        self.by_client.inc((decision.client, decision.protocol, tier))
        if decision.cache == "hit" or decision.cache == "miss":
            if tier == "L0":
                self.lookups.inc(_L0_HIT)
            else:
                self.lookups.inc(_L0_MISS)
                if tier == "L1":
                    self.lookups.inc(_L1_HIT)
                elif l1_verdict(decision.details) is not None:
                    self.lookups.inc(_L1_MISS)
        if decision.escalated_from:
            self.escalations.inc((">".join((*decision.escalated_from, tier)),))
        cost, at_frontier = answer_costs(self.pricing, tier, decision.model, decision.prompt_tokens or 0,
                                         decision.completion_tokens or 0)
        if cost > 0:  # most answers are free (caches, rules, local tiers)
            self.cost.inc((tier,), cost)
        saved = at_frontier - cost
        if saved > 0:
            self.saved.inc(_NO_LABELS, saved)
