"""Start the decision log writer, the decision hub's observability subscriber with its own task.

(The watcher metrics are an in-process handler attached to the hub: see serve.py.)"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from actors.decision_log import DecisionLogActor
from daari.datadir import load_secret
from daari.observe.decision_row import DecisionRows
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
    if config.log.decisions:
        writer = DecisionLogActor(
            decisions_path(config.data_dir), rt.decisions, DecisionRows(config.pricing).values,
            buffer=config.log.queue_size, batch=config.log.batch_size, retention_s=config.log.retention_days * 86400,
            max_rows=config.log.max_rows, flush_s=config.log.flush_interval_s,
            on_dropped=lambda count: rt.metrics.inc("decision_log_rows_dropped_total", count))
        await nursery.start(writer.run)
