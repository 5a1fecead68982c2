"""Start daari: actors first (with `nursery.start`, so we listen only once they are ready), then Hypercorn.

SIGINT/SIGTERM stop accepting connections; in-flight requests get `server.grace_period_s`, then are
cancelled; then the actors stop.
"""

from __future__ import annotations

import logging
import signal
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from actors.runtime import Health
from actors.table import Shared, actor_table
from daari.cache.l0_memory import L0Memory
from daari.cache.partition import forwards_client_keys
from daari.config import Config
from daari.datadir import load_secret
from daari.errors import StartupError
from daari.executors.base import Executor
from daari.executors.registry import make_executors
from daari.heap import freeze_long_lived
from daari.metrics import Metrics
from daari.observe.metrics_subscriber import ObservedMetrics
from daari.pipeline.body_work import BodyWork
from daari.pipeline.decision_subscribers import attach_decision_subscribers
from daari.pipeline.decision_summary import DecisionSummary, log_summaries
from daari.pipeline.runtime import Runtime
from daari.redact import redact_url
from daari.responses.store import ResponseArchive
from daari.rules.tier import RulesTier
from daari.server.app import DaariApp
from daari.server.guard import GuardPolicy, require_token_where_needed
from daari.server.l1_actors import l1_tier, model_asker
from daari.server.limits import apply_to_hypercorn
from daari.server.observers import start_observers
from daari.tools.startup import start_tools

log = logging.getLogger("daari")


@dataclass
class RunningServer:
    url: str
    runtime: Runtime
    shutdown: trio.Event


def _hypercorn_config(config: Config) -> HypercornConfig:
    hc = HypercornConfig()
    hc.bind = [f"{config.server.host}:{config.server.port}"]
    hc.accesslog = None
    hc.errorlog = logging.getLogger("hypercorn.error")
    hc.graceful_timeout = config.server.grace_period_s
    apply_to_hypercorn(hc, config.server)  # head size and time limits (server/limits.py)
    hc.include_server_header = False  # no "server: hypercorn-h11" on every answer: it tells clients nothing useful
    return hc


def tier_table(config: Config, executors: dict[str, Executor]) -> str:
    lines = ["tier  executor   model / upstream"]
    for tier in ("L3", "L4", "L5", "L6"):
        tc = config.tiers.get(tier)
        if tc is None:
            lines.append(f"{tier:<5} -          (not configured)")
            continue
        where = redact_url(tc.base_url) if tc.base_url else "in-process"
        model = tc.model or ("SmolLM2-135M-Instruct" if tc.executor == "embedded" else "(client's model)")
        state = "" if tier in executors else "  [disabled: frontier.enabled is false]"
        lines.append(f"{tier:<5} {tc.executor:<10} {model} @ {where}{state}")
    return "\n".join(lines)


def _mb(megabytes: float) -> int:
    return int(megabytes * 1024 * 1024)


def l0_memory(config: Config) -> L0Memory:
    l0 = config.cache.l0
    return L0Memory(_mb(l0.memory_mb), _mb(l0.max_pending_mb), l0.ttl_s)


async def run_server(config: Config, *, handle_signals: bool = False,
                     task_status: trio.TaskStatus[RunningServer] = trio.TASK_STATUS_IGNORED) -> None:
    guard_policy = GuardPolicy.from_config(config.server)
    require_token_where_needed(config.server, guard_policy)
    health = Health()
    archive = ResponseArchive(Path(config.data_dir) / "responses.sqlite", config.responses.keep,
                              config.responses.keep_total)
    executors = make_executors(config)
    shared = Shared(l0_memory(config), Metrics())
    table = actor_table(config, executors, shared)
    rt = Runtime(
        config=config, cache=table.address("cache"), executor=table.address("executor"), health=health,
        metrics=shared.metrics,
        tools_capable={t: ex.supports_tools for t, ex in executors.items()},
        executor_kinds={t: ex.kind for t, ex in executors.items()},
        l0_memory=shared.memory, body_work=BodyWork(config.server.thread_parse_bytes),
        responses=archive,
    )
    shared.ask_model = model_asker(rt)
    if config.rules.enabled:
        rt.shortcuts["L2"] = RulesTier(config.rules)
    shutdown = rt.stopping  # live tails close on it rather than holding the grace period
    # The response archive is closed once every request and actor is done (SQLite checkpoints, removes its WAL).
    async with aclosing(archive), trio.open_nursery() as actors:
        await table.start(actors, health)
        # The cheap in-process handlers are attached to the hub as one; the decision log attaches with a queue of
        # its own (server/observers.py); live tails subscribe.
        handlers = [ObservedMetrics(rt.metrics, config.pricing).observe]
        if config.log.summary_interval_s > 0:
            summary = DecisionSummary()
            handlers.append(summary.add)
            actors.start_soon(log_summaries, summary, config.log.summary_interval_s)
        attach_decision_subscribers(rt.decisions, rt.metrics, handlers)
        await start_observers(actors, rt)
        if config.cache.l1.enabled:
            rt.shortcuts["L1"] = l1_tier(rt, table, shared)
        if forwards_client_keys(config):
            rt.partition_secret = await trio.to_thread.run_sync(_partition_secret, Path(config.data_dir))
        tool_runner = table.get("tool_runner")  # in the table only with tools.enabled
        if tool_runner is not None:
            await start_tools(actors, rt, tool_runner)
        if handle_signals:
            actors.start_soon(_stop_on_signal, shutdown)
        freeze_long_lived("server start")  # modules, config, actors; models freeze when they load
        async with trio.open_nursery() as front:
            binds = await front.start(lambda task_status: hypercorn_serve(
                _asgi(DaariApp(rt, guard_policy)), _hypercorn_config(config), shutdown_trigger=shutdown.wait,
                task_status=task_status))
            url = binds[0]
            log.info("daari listening on %s\n%s\n%s", url, tier_table(config, executors),
                     _privacy_lines(config, rt, guard_policy))
            task_status.started(RunningServer(url, rt, shutdown))
        log.info("daari stopped accepting requests; stopping actors")
        rt.decisions.close()  # subscribers end once they have handled what is queued
        actors.cancel_scope.cancel()


def _partition_secret(data_dir: Path) -> bytes:
    try:
        return load_secret(data_dir)
    except OSError as exc:
        raise StartupError(f"cannot create the cache partition secret in {data_dir}: {exc.strerror}; "
                           "choose another data dir with --data-dir or data_dir") from None


def _privacy_lines(config: Config, rt: Runtime, policy: GuardPolicy) -> str:
    """Where private data lives and who may call: a user should not have to read the docs to know."""
    partition = "by client credential" if rt.partition_secret is not None else "shared (no tier forwards keys)"
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
