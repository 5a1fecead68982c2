"""Decision metrics for people watching daari: requests by client, cache lookups per level, escalation
paths and the estimated cost saved. One of the decision hub's in-process handlers (attached, synchronous)."""

from __future__ import annotations

from daari.config import PricingConfig
from daari.metrics import Metrics
from daari.observe.decision_row import l1_looked_up
from daari.pipeline.decision import RoutingDecision
from daari.pricing import AnswerCosts

# cache_lookups_total{level,result} label values, built once.
_L0_HIT, _L0_MISS, _L1_HIT, _L1_MISS = ("L0", "hit"), ("L0", "miss"), ("L1", "hit"), ("L1", "miss")
_NO_LABELS: tuple[str, ...] = ()


class ObservedMetrics:
    def __init__(self, metrics: Metrics, pricing: PricingConfig) -> None:
        self.costs = AnswerCosts(pricing)
        self.by_client = metrics.counter("requests_by_client_total", ("client", "protocol", "tier"))
        self.lookups = metrics.counter("cache_lookups_total", ("level", "result"))
        self.escalations = metrics.counter("escalations_by_path_total", ("path",))
        self.cost = metrics.counter("cost_usd_total", ("tier",))
        self.saved = metrics.counter("cost_saved_usd_total")
        # (tier, cache, client, protocol) -> the counters every answer of that kind adds 1 to, in the order
        # they were counted one by one (the page lists series as they first appear).
        self._kinds: dict[tuple[str, str, str, str], tuple[list[float], ...]] = {}

    def observe(self, decision: RoutingDecision) -> None:
        tier = decision.tier
        if decision.error is not None or tier is None:
            return
        kind = (tier, decision.cache, decision.client, decision.protocol)
        for cell in self._kinds.get(kind) or self._cells(kind):
            cell[0] += 1
        if tier != "L0" and tier != "L1" and (decision.cache == "hit" or decision.cache == "miss") \
                and l1_looked_up(decision.details):
            self.lookups.inc(_L1_MISS)  # L1 looked (found nothing, or judged a candidate) and another tier answered
        if decision.escalated_from:
            self.escalations.inc((">".join((*decision.escalated_from, tier)),))
        cost, at_frontier = self.costs((tier, decision.model, decision.prompt_tokens or 0,
                                        decision.completion_tokens or 0))
        saved = at_frontier - cost
        if cost > 0:  # most answers are free (caches, rules, local tiers)
            self.cost.inc((tier,), cost)
        if saved > 0:
            self.saved.inc(_NO_LABELS, saved)

    def _cells(self, kind: tuple[str, str, str, str]) -> tuple[list[float], ...]:
        tier, cache, client, protocol = kind
        cells = [self.by_client.cell((client, protocol, tier))]
        if cache == "hit" or cache == "miss":
            cells.append(self.lookups.cell(_L0_HIT if tier == "L0" else _L0_MISS))
            if tier == "L1":
                cells.append(self.lookups.cell(_L1_HIT))
        found = self._kinds[kind] = tuple(cells)
        return found
