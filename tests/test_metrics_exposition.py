"""The hot-path metrics and decision rows give exactly what prometheus-client's own Counter/Histogram and the
straightforward row formula gave: same /metrics bytes (names, HELP/TYPE, labels, values, order), same rows."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from actors.hub import Hub
from daari.config import PriceConfig, PricingConfig
from daari.metrics import COUNTERS, HELP, HISTOGRAMS, LATENCY_BUCKETS, PREFIX, TIER_SERIES, Metrics
from daari.observe.decision_log import COLUMNS
from daari.observe.decision_row import DecisionRows, decision_row, decision_values, l1_verdict
from daari.observe.metrics_subscriber import ObservedMetrics
from daari.pipeline.decision import AttemptRecord, RoutingDecision
from daari.pipeline.decision_subscribers import attach_decision_subscribers
from daari.pricing import estimate_cost, frontier_cost
from daari.sessions.economics import lost_cache_cost, rates_for

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # as daari did: no *_created series


class ReferenceMetrics:
    """prometheus-client's own Counter/Histogram for every declared name, made at start with its known series
    (as the Prometheus docs advise), then counted name by name."""

    def __init__(self, tiers: tuple[str, ...] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.metrics: dict[str, Any] = {}
        for name, declared in COUNTERS.items():
            counter = self.metrics[name] = Counter(PREFIX + name, _doc(name), declared.labels, registry=self.registry)
            for values in (*declared.start, *((tier,) for tier in tiers if name in TIER_SERIES)):
                counter.labels(*values)
        for name, declared in HISTOGRAMS.items():
            self.metrics["histogram:" + name] = Histogram(PREFIX + name, _doc(name), declared.labels,
                                                          registry=self.registry, buckets=LATENCY_BUCKETS)

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        counter = self.metrics[name]
        (counter.labels(**labels) if labels else counter).inc(amount)

    def observe(self, name: str, value: float, **labels: str) -> None:
        histogram = self.metrics["histogram:" + name]
        (histogram.labels(**labels) if labels else histogram).observe(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _doc(name: str) -> str:
    return HELP.get(name, f"daari {name.replace('_', ' ')}")


def test_counters_and_histograms_render_as_prometheus_client_did() -> None:
    rng = random.Random(7)
    metrics, reference = Metrics(), ReferenceMetrics()
    requests = metrics.counter("requests_total", ("cache", "tier"))  # a hot-path handle beside `inc`
    durations = metrics.histogram("request_duration_seconds", ("tier",))
    edges = [0.0, -1.0, 0.001, 0.0025, 1.0, 300.0, 300.0001, math.inf, math.nan, 1e-9, 42.0]
    for _ in range(2000):
        tier, cache = rng.choice(["L0", "L3", "L6", 'od"d\\']), rng.choice(["hit", "miss"])
        kind = rng.randrange(6)
        if kind == 0:
            requests.inc((cache, tier))
            reference.inc("requests_total", tier=tier, cache=cache)
        elif kind == 1:
            metrics.inc("requests_total", cache=cache, tier=tier)
            reference.inc("requests_total", tier=tier, cache=cache)
        elif kind == 2:
            seconds = rng.choice(edges) if rng.random() < 0.3 else rng.expovariate(5)
            durations.observe((tier,), seconds)
            reference.observe("request_duration_seconds", seconds, tier=tier)
        elif kind == 3:
            amount = rng.choice([0, 1, 0.1, 2.5e-7, 3])
            metrics.inc("cost_saved_usd_total", amount)
            reference.inc("cost_saved_usd_total", amount)
        elif kind == 4:
            metrics.observe("first_byte_seconds", 0.02, tier=tier)
            reference.observe("first_byte_seconds", 0.02, tier=tier)
        else:
            code = f"c{rng.randrange(3)}"
            metrics.inc("refused_total", code=code, status="404")
            reference.inc("refused_total", status="404", code=code)
    assert metrics.render() == reference.render()


def decision(i: int, tier: str | None, cache: str = "miss", error: str | None = None, **fields: Any) -> RoutingDecision:
    base: dict[str, Any] = dict(
        request_id=f"req_{i}", time=1.7e9 + i, protocol="openai", client="aider", model_requested="good",
        stream=False, status=200 if error is None else 400, tier=tier, executor="x", model="good", cache=cache,
        task_type="generate_small", rule_id="R-1", ceiling="L6", classifier="heuristic", agent_turn=False,
        confidence=None, escalated_from=(), attempts=(), warning=None, error=error, latency_ms=12.5, ttft_ms=None,
        prompt_tokens=13, completion_tokens=15)
    return RoutingDecision(**{**base, **fields})


MIX = [
    decision(1, "L3", latency_ms=812.5, ttft_ms=101.25, stream=True, attempts=(AttemptRecord("L3", "accepted", 0.91),)),
    decision(2, "L0", "hit", latency_ms=0.18, ttft_ms=0.172),
    decision(3, None, "none", error="invalid_request", prompt_tokens=None, completion_tokens=None),
    decision(4, "L6", latency_ms=4200.0, ttft_ms=900.0, escalated_from=("L3", "L4"), model="gpt-5",
             attempts=(AttemptRecord("L3", "low_confidence", 1e-05), AttemptRecord("L4", "failed", None, "upstream"),
                       AttemptRecord("L6", "accepted", 0.99))),
    decision(5, "L1", details={"similarity": 0.97, "verified_by": "rules"}, protocol="anthropic", client="claude-code"),
    decision(6, "L3", details={"verdict": {"accepted": False}}, prompt_tokens=0, completion_tokens=0),
    decision(7, "L0", "hit", latency_ms=0.2, ttft_ms=0.19, client="curl"),
    decision(8, "L2", "off", prompt_tokens=None, completion_tokens=None, rule_id=None),
    decision(9, None, "miss", error="client_disconnected", status=499),
    decision(10, "L3", "skipped", ttft_ms=5.0, details={"verdict": "rejected", "similarity": 1}, model="priced"),
    decision(11, "L0", "hit", latency_ms=2500.0, ttft_ms=2500.0, prompt_tokens=120000, completion_tokens=3),
    decision(12, "Lt", "bypassed", latency_ms=0.0, prompt="full text é", prompt_hash="abc", model="unpriced"),
    decision(13, "L6", model="gpt-5", session="s-1", call_type="main", cache_read_tokens=900, cache_write_tokens=40,
             affinity="L6", lost_cache_tokens=1200),
    decision(14, "L3", details={"l1": "miss"}),  # L1 looked and found no candidate: an L1 lookup, a miss
    decision(15, "L3", details={"l1": "skipped_loading"}),  # L1 did not look: no L1 lookup
    decision(16, "L6", "skipped", details={"l1": "rejected", "verdict": "rejected", "similarity": 0.9}),
]
PRICING = PricingConfig(models={"priced": PriceConfig(0.5, 1.25), "gpt-5": PriceConfig(1.25, 10.0)})


def reference_observe(metrics: ReferenceMetrics, d: RoutingDecision) -> None:
    """The subscribers' counting as it was written against the name-and-labels API."""
    if d.error == "client_disconnected":  # abandoned: the client left first, not an error (issue 19)
        metrics.inc("abandoned_total", tier=d.tier or "none")
        return
    if d.error is not None:
        metrics.inc("errors_total", code=d.error)
        return
    tier = d.tier or "none"
    metrics.inc("requests_total", tier=tier, cache=d.cache)
    metrics.observe("request_duration_seconds", d.latency_ms / 1000, tier=tier)
    if d.ttft_ms is not None:
        metrics.observe("first_byte_seconds", d.ttft_ms / 1000, tier=tier)
    if d.tier is None:
        return
    metrics.inc("requests_by_client_total", tier=tier, protocol=d.protocol, client=d.client)
    if d.cache in ("hit", "miss"):
        metrics.inc("cache_lookups_total", level="L0", result="hit" if tier == "L0" else "miss")
        if tier != "L0" and (tier == "L1" or l1_verdict(d.details) is not None or d.details.get("l1") == "miss"):
            metrics.inc("cache_lookups_total", level="L1", result="hit" if tier == "L1" else "miss")
    if d.escalated_from:
        metrics.inc("escalations_by_path_total", path=">".join((*d.escalated_from, tier)))
    prompt, completion = d.prompt_tokens or 0, d.completion_tokens or 0
    cost = estimate_cost(PRICING, tier, d.model, prompt, completion)
    if cost > 0:
        metrics.inc("cost_usd_total", cost, tier=tier)
    saved = frontier_cost(PRICING, prompt, completion) - cost
    if saved > 0:
        metrics.inc("cost_saved_usd_total", saved)


def test_the_attached_subscribers_count_a_mix_of_decisions_as_before() -> None:
    hub: Hub[RoutingDecision] = Hub()
    metrics, reference = Metrics(tiers=("L3", "L6")), ReferenceMetrics(tiers=("L3", "L6"))
    metrics.inc("refused_total", code="not_found", status="404")  # counted elsewhere too
    reference.inc("refused_total", code="not_found", status="404")
    attach_decision_subscribers(hub, metrics, [ObservedMetrics(metrics, PRICING).observe])
    for d in MIX * 3:
        hub.publish(d)
        reference_observe(reference, d)
    assert metrics.render() == reference.render()
    assert metrics.value("requests_total", tier="L0", cache="hit") == 9


def reference_row(d: RoutingDecision) -> dict[str, Any]:
    """A decision-log row as it was built: every column computed, costs always priced and rounded."""
    answered = d.tier is not None and d.error is None
    prompt, completion = d.prompt_tokens or 0, d.completion_tokens or 0
    actual = estimate_cost(PRICING, d.tier, d.model, prompt, completion) if answered else 0.0
    at_l6 = frontier_cost(PRICING, prompt, completion) if answered else 0.0
    similarity = d.details.get("similarity")
    return {
        "request_id": d.request_id, "time": d.time, "protocol": d.protocol, "client": d.client,
        "model": d.model_requested, "stream": int(d.stream), "tier": d.tier, "task_type": d.task_type,
        "rule_id": d.rule_id, "cache": d.cache, "cache_level": d.tier if d.tier in ("L0", "L1") else None,
        "similarity": float(similarity) if isinstance(similarity, int | float) else None,
        "verdict": l1_verdict(d.details), "escalated_from": ",".join(d.escalated_from) or None,
        "attempts": json.dumps([{"tier": a.tier, "outcome": a.outcome, "confidence": a.confidence, "error": a.error}
                                for a in d.attempts], separators=(",", ":")),
        "agent_turn": int(d.agent_turn), "latency_ms": d.latency_ms, "ttft_ms": d.ttft_ms,
        "input_tokens": prompt, "output_tokens": completion, "cost_usd": round(actual, 8),
        "cost_l6_usd": round(at_l6, 8), "saved_usd": round(at_l6 - actual, 8), "status": d.status,
        "error": d.error, "prompt_hash": d.prompt_hash, "prompt": d.prompt, "session": d.session,
        "call_type": d.call_type, "cache_read_tokens": d.cache_read_tokens,
        "cache_write_tokens": d.cache_write_tokens, "affinity": d.affinity,
        "lost_cache_usd": round(lost_cache_cost(rates_for(PRICING, d.tier, d.model), d.lost_cache_tokens), 8)
        if d.lost_cache_tokens and d.tier is not None else 0.0,
        "project": d.details.get("project"),
        "secrets_redacted": int(d.details.get("redacted") or d.details.get("secrets_seen") or 0),
        "results_withheld": int(d.details.get("withheld") or 0),
        "l1": d.details.get("l1"),
    }


def test_decision_rows_hold_the_values_and_types_they_did() -> None:
    rows = DecisionRows(PRICING)  # as the writer keeps it: prices of answers seen before are remembered
    for d in MIX * 2:
        expected = reference_row(d)
        assert list(expected) == list(COLUMNS)
        for values in (decision_values(d, PRICING), rows.values(d)):
            assert [(v, type(v)) for v in values] == [(v, type(v)) for v in expected.values()], d.request_id
        assert decision_row(d, PRICING) == expected
