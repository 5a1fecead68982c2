"""Start daari: actors first (with `nursery.start`, so we listen only once they are ready), then the front end
(Hypercorn, or daari's own h11 server with `server.front_end: "h11"`).

SIGINT/SIGTERM stop accepting connections; in-flight requests get `server.grace_period_s`, then are
cancelled; then the actors stop.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from daari.config import Config
from daari.executors.base import Executor
from daari.heap import collector_thresholds, freeze_long_lived
from daari.models import embedded_model
from daari.observe.gc_pauses import timed_collections
from daari.pipeline.shortcuts import ShortcutTier
from daari.redact import redact_url
from daari.server.app import DaariApp
from daari.server.compose import Parts, compose
from daari.server.guard import GuardPolicy
from daari.server.h11_front import serve as h11_serve
from daari.server.idle_trim import libc_malloc_trim, trim_when_idle
from daari.server.limits import apply_to_hypercorn
from daari.server.observers import start_observers

log = logging.getLogger("daari")


@dataclass
class RunningServer:
    url: str
    parts: Parts  # what compose built: tests and benches look inside
    shutdown: trio.Event


def _hypercorn_config(config: Config) -> HypercornConfig:
    hc = HypercornConfig()
    hc.bind = [f"{config.server.host}:{config.server.port}"]
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.graceful_timeout = config.server.grace_period_s
    hc.backlog = config.server.backlog
    apply_to_hypercorn(hc, config.server)  # head size and time limits (server/limits.py)
    hc.include_server_header = False  # no "server: hypercorn-h11" on every answer: it tells clients nothing useful
    return hc


def _front_end(config: Config, app: DaariApp, shutdown: trio.Event) -> Any:
    """The server `front.start` runs: Hypercorn, or daari's own h11 front end (`server.front_end`)."""
    if config.server.front_end == "h11":
        return partial(h11_serve, app, config.server, shutdown_trigger=shutdown.wait)
    return partial(hypercorn_serve, _asgi(app), _hypercorn_config(config), shutdown_trigger=shutdown.wait)


def tier_table(config: Config, executors: Mapping[str, Executor]) -> str:
    """The tiers as daari starts them, with each one's context window (requests that do not fit skip the tier)."""
    lines = ["tier  executor   window   model / upstream"]
    for tier in ("L3", "L4", "L5", "L6"):
        tc = config.tiers.get(tier)
        if tc is None:
            lines.append(f"{tier:<5} -          -        (not configured)")
            continue
        where = redact_url(tc.base_url) if tc.base_url else "in-process"
        model = (embedded_model(tc.model).name if tc.executor == "embedded"
                 else tc.model or "(client's model)")
        executor = executors.get(tier)
        window = executor.context_window() if executor is not None else tc.context_window
        state = "" if executor is not None else "  [disabled: frontier.enabled is false]"
        lines.append(f"{tier:<5} {tc.executor:<10} {_window(window):<8} {model} @ {where}{state}")
    return "\n".join(lines)


def _window(tokens: int | None) -> str:
    if tokens is None:
        return "?"
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


async def run_server(config: Config, *, handle_signals: bool = False,
                     shortcuts: Mapping[str, ShortcutTier] | None = None,
                     task_status: trio.TaskStatus[RunningServer] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled (or a signal, with `handle_signals`). `shortcuts` replaces shortcut tiers by name."""
    parts = await compose(config, shortcuts=shortcuts, started_at=time.time())
    shutdown = parts.stopping  # live tails close on it rather than holding the grace period
    # The collector's policy is the process's: set while this server runs, put back when it stops.
    pauses = parts.metrics.histogram("gc_pause_seconds", ("generation",))
    with collector_thresholds(config.server.gc_young_threshold, config.server.gc_middle_threshold), \
            timed_collections(pauses):
        # The response archive is closed once every request and actor is done (SQLite checkpoints, removes its
        # WAL).
        async with aclosing(parts.responses), trio.open_nursery() as actors:
            start_observers(actors, config, parts.decisions, parts.metrics)
            parts.client_watches.start(actors)  # supervised here; its cancel at the end ends any watch left
            await parts.table.start(actors, parts.health)
            if handle_signals:
                actors.start_soon(_stop_on_signal, shutdown)
            if config.server.idle_trim_s > 0:
                actors.start_soon(trim_when_idle, config.server.idle_trim_s, libc_malloc_trim())
            freeze_long_lived("server start")  # modules, config, actors; models freeze when they load
            async with trio.open_nursery() as front:
                binds = await front.start(_front_end(config, parts.app, shutdown))
                url = binds[0]
                log.info("daari listening on %s\n%s\n%s", url, tier_table(config, parts.executors),
                         _privacy_lines(config, parts.partition_secret, parts.app.policy))
                task_status.started(RunningServer(url, parts, shutdown))
            log.info("daari stopped accepting requests; stopping actors")
            actors.cancel_scope.cancel()  # the hub actor's row closes the hub: its subscribers end


def _privacy_lines(config: Config, partition_secret: bytes | None, policy: GuardPolicy) -> str:
    """Where private data lives and who may call: a user should not have to read the docs to know."""
    partition = "by client credential" if partition_secret is not None else "shared (no tier forwards keys)"
    token = f"required ({config.server.token_env})" if policy.token else "not set (loopback only)"
    origins = ", ".join(sorted(policy.allowed_origins)) or "none"
    return (f"data dir: {Path(config.data_dir).resolve()} (private: 0700, files 0600); cache partition: "
            f"{partition}\ntoken: {token}; browser origins allowed: {origins}")


def _asgi(app: DaariApp) -> Any:
    """DaariApp speaks ASGI 3 with plain dicts; hypercorn types the same messages as TypedDicts."""
    return app


async def _stop_on_signal(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s: finishing in-flight requests, then stopping", signal.Signals(signum).name)
            shutdown.set()
            return
