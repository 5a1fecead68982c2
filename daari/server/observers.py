"""Start the decision hub's observability subscribers: the decision log writer and the watcher metrics."""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from actors.decision_log import DecisionLogActor
from actors.hub import follow
from daari.datadir import load_secret
from daari.observe.decision_row import decision_row
from daari.observe.metrics_subscriber import ObservedMetrics
from daari.pipeline.decision import RoutingDecision
from daari.pipeline.runtime import Runtime
from daari.server.observe_routes import decisions_path

log = logging.getLogger("daari")


async def start_observers(nursery: trio.Nursery, rt: Runtime) -> None:
    """Every subscriber is subscribed when this returns, so no decision made after start is missed."""
    config = rt.config
    if config.log.prompts != "none":
        try:
            rt.log_secret = await trio.to_thread.run_sync(load_secret, Path(config.data_dir))
        except OSError as exc:  # an unwritable data dir: hashes stay unkeyed; the cache says so already
            log.warning("prompt hashes are not keyed: cannot read the data dir secret: %s", exc.strerror)
    observed = ObservedMetrics(rt.metrics, config.pricing)
    await nursery.start(lambda task_status: follow(rt.decisions, "observed_metrics", observed.observe,
                                                   buffer=4096, task_status=task_status))
    if config.log.decisions:
        pricing = config.pricing

        def to_row(decision: RoutingDecision) -> dict[str, object]:
            return decision_row(decision, pricing)

        writer = DecisionLogActor(
            decisions_path(config.data_dir), rt.decisions, to_row, buffer=config.log.queue_size,
            batch=config.log.batch_size, retention_s=config.log.retention_days * 86400,
            max_rows=config.log.max_rows,
            on_dropped=lambda count: rt.metrics.inc("decision_log_rows_dropped_total", count))
        await nursery.start(writer.run)
