"""The decision hub's built-in handlers, attached when the server starts: the log line, the request metrics and
the periodic summary. (The decision log is an actor of its own, a row of server/actor_table.py; live tails
subscribe per connection.)"""

from __future__ import annotations

import trio

from actors.hub import Hub
from daari.config import Config
from daari.metrics import Metrics
from daari.observe.metrics_subscriber import ObservedMetrics
from daari.observe.otel_export import OtlpExporter
from daari.pipeline.decision import RoutingDecision
from daari.pipeline.decision_subscribers import attach_decision_subscribers
from daari.pipeline.decision_summary import DecisionSummary, log_summaries


def start_observers(nursery: trio.Nursery, config: Config, decisions: Hub[RoutingDecision], metrics: Metrics) -> None:
    """The cheap in-process handlers, attached to the hub as one (they never block or await)."""
    handlers = [ObservedMetrics(metrics, config.pricing).observe]
    if config.log.summary_interval_s > 0:
        summary = DecisionSummary()
        handlers.append(summary.add)
        nursery.start_soon(log_summaries, summary, config.log.summary_interval_s)
    if config.otel.enabled:  # off: nothing attached, nothing runs
        exporter = OtlpExporter(config.otel, metrics)
        handlers.append(exporter.add)
        nursery.start_soon(exporter.run)
    attach_decision_subscribers(decisions, metrics, handlers)
