"""daari's table of actors: which actors run, with what mailbox and restart policy, and how faults look.

The one place the server's actors are declared; serve.py opens this table (addresses first, so the runtime
and the tiers can be wired), then starts it. A new actor is a module under actors/ and a row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from actors import runtime
from actors.cache import CacheActor
from actors.embedder import EmbedderActor, EmbedderStatus
from actors.executor import ExecutorActor
from actors.runtime import ActorSpec, ActorTable, Address, Faults, RestartPolicy
from actors.semantic_cache import IndexStats, SemanticCacheActor
from actors.shadow import ShadowActor, ShadowDeps
from actors.tool_runner import ToolRunnerActor
from actors.verifier import AskModel, VerifierActor
from daari.cache.l0_memory import L0Memory
from daari.config import Config
from daari.errors import ActorCrashed, ActorDown, DaariError, Overloaded
from daari.executors.base import Executor
from daari.metrics import Metrics


def client_error(fault: runtime.ActorFault) -> DaariError:
    """A runtime fault as the client sees it: 503 / Anthropic 529, or 500 for a crash."""
    if isinstance(fault, runtime.ActorBusy):
        return Overloaded(fault.message)
    if isinstance(fault, runtime.ActorCrashed):
        return ActorCrashed(f"{fault.message}; GET /healthz shows its state")
    return ActorDown(f"{fault.message}; GET /healthz shows why")


FAULTS = Faults(expected=(DaariError,), translate=client_error)


@dataclass
class Shared:
    """What actors share with request tasks, made before either: the L0 front, metrics, L1's status objects."""

    memory: L0Memory
    metrics: Metrics
    embedder_status: EmbedderStatus = field(default_factory=EmbedderStatus)
    index_stats: IndexStats = field(default_factory=IndexStats)
    # trust.shadow sampling on: the ShadowActor's dependencies from the table (server/shadow_wiring.py)
    shadow: Callable[[ActorTable], ShadowDeps] | None = None


def _mb(megabytes: float) -> int:
    return int(megabytes * 1024 * 1024)


def actor_table(config: Config, executors: dict[str, Executor], shared: Shared,
                model_asker: Callable[[Address], AskModel]) -> ActorTable:
    """The actors to start, in order (each is ready before the next starts). `model_asker` makes, from the
    ExecutorActor's address, how the VerifierActor asks a model (cache.l1.verify: model)."""
    policy = RestartPolicy(config.actors.max_restarts, config.actors.restart_window_s,
                           config.actors.backoff_initial_s, config.actors.backoff_max_s)
    data_dir = Path(config.data_dir)
    size = config.actors.mailbox_size
    l0, l1 = config.cache.l0, config.cache.l1
    rows = [
        ActorSpec("cache", lambda: CacheActor(data_dir / "l0.sqlite", shared.memory,
                                              max_disk_bytes=_mb(l0.max_disk_mb), ttl_s=l0.ttl_s,
                                              metrics=shared.metrics), size, policy),
        ActorSpec("executor", lambda: ExecutorActor(executors), size, policy),
    ]
    if l1.enabled:
        # An answer L0 no longer serves for being too old is not served by L1 either.
        max_age_s = min(l1.max_age_s, l0.ttl_s) if l0.ttl_s > 0 else l1.max_age_s
        rows += [
            ActorSpec("embedder", lambda: EmbedderActor(shared.embedder_status, l1.embed_batch_size,
                                                        l1.embed_batch_wait_ms / 1000.0), size, policy),
            ActorSpec("l1", lambda: SemanticCacheActor(data_dir, max_entries=l1.max_entries, max_age_s=max_age_s,
                                                       trees=l1.index_trees, rebuild_after=l1.rebuild_after,
                                                       stats=shared.index_stats), size, policy),
            # Built when it starts, from the executor's address (the table made it with the others).
            ActorSpec("verifier", lambda: VerifierActor(l1.verify, model_asker(table.address("executor"))), size,
                      policy),
        ]
    if config.tools.enabled:  # commands run only when asked for in the config
        rows.append(ActorSpec("tool_runner", lambda: ToolRunnerActor(data_dir, config.tools), size, policy))
    make_shadow = shared.shadow
    if make_shadow is not None:  # last: it asks the executor, L1 and the embedder
        rows.append(ActorSpec("shadow", lambda: ShadowActor(make_shadow(table)), size, policy))
    table = ActorTable(rows, FAULTS)
    return table
