"""The decision hub's built-in subscribers: one log line per decision, and the request counters of /metrics.

Each runs as its own task on its own bounded subscription (`actors.hub.follow`), so neither can slow a
request; `start_decision_subscribers` starts them before the server listens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import trio

from actors.hub import Hub, follow
from daari.metrics import Metrics
from daari.pipeline.decision import RoutingDecision

log = logging.getLogger("daari.pipeline")

# Built-in subscribers handle a decision in microseconds; a deep buffer rides out a burst on a busy loop.
BUILTIN_BUFFER = 4096


def log_decision(decision: RoutingDecision) -> None:
    """One line per routing decision: never content, never headers. Hits only at DEBUG (they are many)."""
    failed = decision.error is not None
    level = logging.DEBUG if decision.cache_hit else (logging.WARNING if failed else logging.INFO)
    if not log.isEnabledFor(level):
        return
    escalated = f" escalated_from={','.join(decision.escalated_from)}" if decision.escalated_from else ""
    warning = f" warning={decision.warning}" if decision.warning else ""
    outcome = f" error={decision.error} status={decision.status}" if failed else ""
    log.log(level, "%s %s %s tier=%s rule=%s agent_turn=%s client=%s ms=%.1f%s%s%s", decision.request_id,
            decision.protocol, "stream" if decision.stream else "json", decision.tier or "-", decision.rule_id,
            decision.agent_turn, decision.client, decision.latency_ms, escalated, warning, outcome)


class DecisionMetrics:
    """Request metrics from decisions: requests_total{tier,cache} and latency histograms{tier} when answered,
    errors_total{code}."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def observe(self, decision: RoutingDecision) -> None:
        if decision.error is not None:
            self.metrics.inc("errors_total", code=decision.error)
            return
        tier = decision.tier or "none"
        self.metrics.inc("requests_total", tier=tier, cache=decision.cache)
        self.metrics.observe("request_duration_seconds", decision.latency_ms / 1000, tier=tier)
        if decision.ttft_ms is not None:
            self.metrics.observe("first_byte_seconds", decision.ttft_ms / 1000, tier=tier)


DecisionHandler = Callable[[RoutingDecision], None]


async def start_decision_subscribers(nursery: trio.Nursery, hub: Hub[RoutingDecision], metrics: Metrics,
                                     more: Sequence[DecisionHandler] = ()) -> None:
    """Subscribe the log line, the metrics and `more` in-process handlers; subscribed when this returns.

    All run on one subscription ("builtin"): each takes microseconds, and one task wake-up per decision
    for all of them instead of one each is measurable on the L0 hit path (bench/hit_cpu.py).
    """
    observer = DecisionMetrics(metrics)
    handlers: tuple[DecisionHandler, ...] = (log_decision, observer.observe, *more)

    def handle(decision: RoutingDecision) -> None:
        for handler in handlers:
            handler(decision)

    await nursery.start(lambda task_status: follow(hub, "builtin", handle, buffer=BUILTIN_BUFFER,
                                                   task_status=task_status))
