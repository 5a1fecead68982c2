"""daari's table of actors: which actors run, with what mailbox and restart policy.

The one place the server's actors are declared. The composition root (server/compose.py) opens this table
(addresses first, so the steps and routes can be handed them), and serve.py starts it. A new actor is a module
under actors/ and a row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from actors.cache import CacheActor
from actors.decision_log import DecisionLogActor, DecisionQueue
from actors.embedder import EmbedderActor, EmbedderStatus
from actors.executor import ExecutorActor, Generations
from actors.faults import FAULTS
from actors.hub import Hub, HubActor
from actors.l1_index import L1Index
from actors.org_cache import OrgCacheActor
from actors.org_l1 import OrgL1Actor
from actors.redis_link import RedisActor
from actors.runtime import ActorSpec, ActorTable, RestartPolicy
from actors.semantic_cache import IndexStats, SemanticCacheActor
from actors.shadow import ShadowActor, ShadowDeps
from actors.tool_runner import ToolRunnerActor
from actors.verifier import AskModel, VerifierActor
from daari.cache.l0_memory import L0Memory
from daari.cache.l0_redis import RedisL0
from daari.cache.l1_redis import RedisL1
from daari.cache.redis_link import RedisLink
from daari.config import Config
from daari.executors.base import Executor
from daari.metrics import Metrics
from daari.observe.decision_log import decisions_path
from daari.observe.decision_row import DecisionRows
from daari.org.client import OrgCache
from daari.pipeline.decision import RoutingDecision


@dataclass
class Shared:
    """What actors share with request tasks, made before either: the L0 front, metrics, L1's status objects."""

    memory: L0Memory
    metrics: Metrics
    decisions: Hub[RoutingDecision]  # request tasks publish to it; the HubActor closes it when the runtime stops
    decision_queue: DecisionQueue | None = None  # the decision log's queue on the hub (log.decisions)
    embedder_status: EmbedderStatus = field(default_factory=EmbedderStatus)
    index_stats: IndexStats = field(default_factory=IndexStats)
    # trust.shadow sampling on: the ShadowActor's dependencies from the table (server/shadow_wiring.py)
    shadow: Callable[[ActorTable], ShadowDeps] | None = None
    redis: RedisLink | None = None  # cache.backend: redis: the link the L0 and L1 stores share
    org: OrgCache | None = None  # cache.org.url: the org cache's tenant links
    # The ExecutorActor's door: request tasks (the execute step, side questions, shadow calls) run generations
    # in their own task on slots the running actor lends them, without its mailbox (actors/executor.py).
    generations: Generations = field(default_factory=Generations)


def _mb(megabytes: float) -> int:
    return int(megabytes * 1024 * 1024)


def actor_table(config: Config, executors: dict[str, Executor], shared: Shared,
                model_asker: Callable[[Generations], AskModel]) -> ActorTable:
    """The actors to start, in order (each is ready before the next starts). `model_asker` makes, from the
    ExecutorActor's door, how the VerifierActor asks a model (cache.l1.verify: model)."""
    policy = RestartPolicy(config.actors.max_restarts, config.actors.restart_window_s,
                           config.actors.backoff_initial_s, config.actors.backoff_max_s)
    data_dir = Path(config.data_dir)
    size = config.actors.mailbox_size
    l0, l1 = config.cache.l0, config.cache.l1
    decisions = shared.decisions
    generations = shared.generations
    rows = [
        ActorSpec("hub", lambda: HubActor(decisions), size, policy, on_down=decisions.close),
    ]
    link = shared.redis
    prefix = config.cache.redis.key_prefix
    if link is not None:  # before the stores that use it
        rows.append(ActorSpec("redis", lambda: RedisActor(link), size, policy))
    org = shared.org
    if org is not None:  # not required: daari serves without its org cache
        rows.append(ActorSpec("org_cache", lambda: OrgCacheActor(org), size, policy, required=False))
    rows += [
        ActorSpec("cache", lambda: CacheActor(RedisL0(link, prefix, l0.ttl_s) if link is not None
                                              else data_dir / "l0.sqlite", shared.memory,
                                              max_disk_bytes=_mb(l0.max_disk_mb), ttl_s=l0.ttl_s,
                                              metrics=shared.metrics), size, policy),
        # Its mailbox serves the tier calls (status, token counts, model lists); generations go through the door,
        # which the supervisor closes with the address's reason once no run will come.
        ActorSpec("executor", lambda: ExecutorActor(executors, generations), size, policy,
                  on_down=lambda: generations.close(table.address("executor").down_reason or "stopped")),
    ]
    if l1.enabled:
        # An answer L0 no longer serves for being too old is not served by L1 either.
        max_age_s = min(l1.max_age_s, l0.ttl_s) if l0.ttl_s > 0 else l1.max_age_s
        rows += [
            ActorSpec("embedder", lambda: EmbedderActor(shared.embedder_status, l1.embed_batch_size,
                                                        l1.embed_batch_wait_ms / 1000.0, data_dir), size, policy),
            ActorSpec("l1", lambda: SemanticCacheActor(
                RedisL1(link, prefix, max_entries=l1.max_entries, max_age_s=max_age_s) if link is not None
                else data_dir, max_entries=l1.max_entries, max_age_s=max_age_s, trees=l1.index_trees,
                rebuild_after=l1.rebuild_after, stats=shared.index_stats, embedder=table.address("embedder")),
            size, policy),
            *([ActorSpec("l1_org", lambda: OrgL1Actor(  # L1-org: the team's index, or the recent key tenants'
                org.link_now, lambda store: L1Index(store, max_entries=l1.max_entries, max_age_s=max_age_s,
                                                    trees=l1.index_trees, rebuild_after=l1.rebuild_after),
                shared.metrics, capacity=config.cache.org.l1_key_tenants, max_entries=l1.max_entries,
                max_age_s=max_age_s, team=org.settings.team), size, policy, required=False)]
              if org is not None and (org.settings.team is not None or config.cache.org.l1_key_tenants > 0)
              else []),
            # Built when it starts, from the executor's address (the table made it with the others).
            ActorSpec("verifier", lambda: VerifierActor(l1.verify, model_asker(generations)), size,
                      policy),
        ]
    if config.tools.enabled:  # commands run only when asked for in the config
        rows.append(ActorSpec("tool_runner", lambda: ToolRunnerActor(data_dir, config.tools), size, policy))
    queue = shared.decision_queue
    if queue is not None:
        logc = config.log
        to_row = DecisionRows(config.pricing).values
        # Not required: daari runs without its log (a read-only data dir); /healthz shows it failed.
        rows.append(ActorSpec("decision_log", lambda: DecisionLogActor(
            queue, decisions_path(config.data_dir), to_row, batch=logc.batch_size,
            retention_s=logc.retention_days * 86400, max_rows=logc.max_rows, flush_s=logc.flush_interval_s),
            size, policy, required=False, on_down=queue.close))
    make_shadow = shared.shadow
    # Not required (daari answers without it); last: it asks the executor, L1 and the embedder.
    if make_shadow is not None:
        rows.append(ActorSpec("shadow", lambda: ShadowActor(make_shadow(table)), size, policy, required=False))
    table = ActorTable(rows, FAULTS)
    return table
