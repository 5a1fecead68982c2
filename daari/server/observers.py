"""The decision hub's subscribers that serve.py starts: the built-in handlers (log line, request metrics, the
periodic summary) and the decision log writer."""

from __future__ import annotations

import trio

from actors.decision_log import DecisionLogActor
from actors.hub import Hub
from daari.config import Config
from daari.metrics import Metrics
from daari.observe.decision_log import decisions_path
from daari.observe.decision_row import DecisionRows
from daari.observe.metrics_subscriber import ObservedMetrics
from daari.pipeline.decision import RoutingDecision
from daari.pipeline.decision_subscribers import attach_decision_subscribers
from daari.pipeline.decision_summary import DecisionSummary, log_summaries


async def start_observers(nursery: trio.Nursery, config: Config, decisions: Hub[RoutingDecision],
                          metrics: Metrics) -> None:
    """Every subscriber is subscribed when this returns, so no decision made after start is missed."""
    # The cheap in-process handlers are attached to the hub as one; the decision log attaches with a queue of its
    # own; live tails subscribe.
    handlers = [ObservedMetrics(metrics, config.pricing).observe]
    if config.log.summary_interval_s > 0:
        summary = DecisionSummary()
        handlers.append(summary.add)
        nursery.start_soon(log_summaries, summary, config.log.summary_interval_s)
    attach_decision_subscribers(decisions, metrics, handlers)
    if config.log.decisions:
        writer = DecisionLogActor(
            decisions_path(config.data_dir), decisions, DecisionRows(config.pricing).values,
            buffer=config.log.queue_size, batch=config.log.batch_size, retention_s=config.log.retention_days * 86400,
            max_rows=config.log.max_rows, flush_s=config.log.flush_interval_s,
            on_dropped=lambda count: metrics.inc("decision_log_rows_dropped_total", count))
        await nursery.start(writer.run)
