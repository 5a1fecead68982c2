"""The decision hub's built-in subscribers: one log line per decision, and the request counters of /metrics.

They are attached to the hub as one synchronous handler ("builtin", `Hub.attach`): together they take a
microsecond or two per decision, less than a subscription's channel and task wake-up would cost. They
never block: a log line is written by the logging handlers as it was from a subscriber task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from actors.hub import Hub
from daari.metrics import Metrics, record
from daari.pipeline.decision import RoutingDecision

log = logging.getLogger("daari.pipeline")


def log_decision(decision: RoutingDecision) -> None:
    """One line per routing decision: never content, never headers. Hits only at DEBUG (they are many); a
    request whose client left is an INFO line (`abandoned`), not a WARNING: nothing went wrong in daari."""
    failed = decision.error is not None
    abandoned = failed and decision.outcome == "abandoned"
    level = logging.DEBUG if decision.cache == "hit" else (logging.WARNING if failed and not abandoned
                                                           else logging.INFO)
    if not log.isEnabledFor(level):
        return
    escalated = f" escalated_from={','.join(decision.escalated_from)}" if decision.escalated_from else ""
    warning = f" warning={decision.warning}" if decision.warning else ""
    outcome = (" abandoned (client left)" if abandoned else
               f" error={decision.error} status={decision.status}" if failed else "")
    log.log(level, "%s %s %s tier=%s rule=%s agent_turn=%s client=%s ms=%.1f%s%s%s", decision.request_id,
            decision.protocol, "stream" if decision.stream else "json", decision.tier or "-", decision.rule_id,
            decision.agent_turn, decision.client, decision.latency_ms, escalated, warning, outcome)


class DecisionMetrics:
    """Request metrics from decisions: requests_total{tier,cache} and latency histograms{tier} when answered,
    errors_total{code}, and abandoned_total{tier} for requests whose client left first (not errors)."""

    def __init__(self, metrics: Metrics) -> None:
        self.errors = metrics.counter("errors_total", ("code",))
        self.abandoned = metrics.counter("abandoned_total", ("tier",))
        self.requests = metrics.counter("requests_total", ("cache", "tier"))
        self.durations = metrics.histogram("request_duration_seconds", ("tier",))
        self.first_bytes = metrics.histogram("first_byte_seconds", ("tier",))
        # (tier, cache, started) -> the series an answer of that kind counts into: one lookup per decision.
        self._kinds: dict[tuple[str, str, bool], tuple[list[float], list[float], list[float]]] = {}

    def observe(self, decision: RoutingDecision) -> None:
        if decision.error is not None:
            if decision.outcome == "abandoned":
                self.abandoned.inc((decision.tier or "none",))
            else:
                self.errors.inc((decision.error,))
            return
        ttft_ms = decision.ttft_ms
        kind = (decision.tier or "none", decision.cache, ttft_ms is not None)
        requests, durations, first_bytes = self._kinds.get(kind) or self._series(kind)
        requests[0] += 1
        record(durations, decision.latency_ms / 1000)
        if ttft_ms is not None:
            record(first_bytes, ttft_ms / 1000)

    def _series(self, kind: tuple[str, str, bool]) -> tuple[list[float], list[float], list[float]]:
        tier, cache, started = kind
        series = (self.requests.cell((cache, tier)), self.durations.series((tier,)),
                  self.first_bytes.series((tier,)) if started else [])
        self._kinds[kind] = series
        return series


DecisionHandler = Callable[[RoutingDecision], None]


def attach_decision_subscribers(hub: Hub[RoutingDecision], metrics: Metrics,
                                more: Sequence[DecisionHandler] = ()) -> None:
    """Attach the log line, the metrics and `more` in-process handlers to the hub, as one handler "builtin".

    One handler calling the others: the hub's per-handler bookkeeping is paid once per decision. An
    exception in one of them skips the rest for that decision and is logged by the hub.
    """
    handlers: tuple[DecisionHandler, ...] = (log_decision, DecisionMetrics(metrics).observe, *more)

    def handle(decision: RoutingDecision) -> None:
        for handler in handlers:
            handler(decision)

    hub.attach("builtin", handle)
