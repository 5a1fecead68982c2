"""The composition root: daari's object graph, built once from the config at start.

Every actor address, store, pipeline step and route is made here and handed exactly what it uses, in its
constructor; nothing is assigned onto a shared object afterwards. The pipeline is the ordered list of the
routing spec's steps: a new tier is a step added to that list. serve.py starts what this builds.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import trio

from actors.decision_log import DecisionQueue
from actors.executor import Generations
from actors.hub import Hub
from actors.runtime import ActorTable, Address, Health
from actors.verifier import AskModel
from daari.budget.caps import caps_of, periods
from daari.budget.ledger import SPEND_FILE, Ledger, SpendStore
from daari.budget.payer import SideSpend
from daari.cache.hit_requests import HitRequests
from daari.cache.key_memo import L0KeyMemo
from daari.cache.l0_memory import L0Memory
from daari.cache.partition import forwards_client_keys
from daari.cache.redis_link import LinkSettings, RedisLink
from daari.config import Config
from daari.datadir import load_secret
from daari.errors import StartupError
from daari.executors.base import Executor
from daari.executors.registry import make_executors
from daari.local.tool_repair import repairs_tools
from daari.metrics import Metrics
from daari.observe.prompt_record import prompt_fields
from daari.org.client import OrgCache, OrgSettings
from daari.pipeline.body_work import BodyWork
from daari.pipeline.cache_guard import CacheGuard
from daari.pipeline.decision import RoutingDecision
from daari.pipeline.hosted_tools import policies
from daari.pipeline.record import PromptDescriber
from daari.pipeline.shortcuts import SHORTCUT_ORDER, ShortcutTier
from daari.pipeline.side_query import Shield, SideQuestions
from daari.pipeline.step import Pipeline, Step
from daari.pipeline.steps.agent_turn import AgentTurnStep
from daari.pipeline.steps.budget import BudgetPlanner, ProjectStep, SpendRecorder
from daari.pipeline.steps.cache_write import AnswerIndex, CacheWriteStep
from daari.pipeline.steps.ccs import CcsTier
from daari.pipeline.steps.classify import ClassifyStep
from daari.pipeline.steps.client_call import ClientCallStep
from daari.pipeline.steps.execute import ExecuteStep, Planner, Tiers
from daari.pipeline.steps.fit import ContextFit, ModelNames
from daari.pipeline.steps.headers import HeadersStep
from daari.pipeline.steps.judge import Judge
from daari.pipeline.steps.l0 import L0Step
from daari.pipeline.steps.l1 import SemanticTier
from daari.pipeline.steps.l2 import RulesTier
from daari.pipeline.steps.lt import ToolTier
from daari.pipeline.steps.org import OrgL0Step, OrgSemanticTier, OrgWriteStep, TenantSemanticTier
from daari.pipeline.steps.parse import ParseStep
from daari.pipeline.steps.privacy import PrivacyGuard
from daari.pipeline.steps.refine import RefineStep
from daari.pipeline.steps.render import RenderStep
from daari.pipeline.steps.session import (
    SessionAffinity,
    SessionHygiene,
    SessionRecordStep,
    SessionStep,
    Upstreams,
)
from daari.pipeline.steps.shadow import ShadowStep
from daari.pipeline.steps.shortcut import ShortcutStep
from daari.pipeline.steps.tool_service import ToolService
from daari.privacy.cache_rule import holds_secret
from daari.privacy.redact import Redactor
from daari.privacy.remote import is_remote
from daari.protocol.chat import Message
from daari.responses.store import ResponseArchive
from daari.routing.classifier import no_lt_probe
from daari.routing.l3_default import l3_task_types
from daari.server.actor_table import Shared, actor_table
from daari.server.app import DaariApp, Routes
from daari.server.budget_route import BudgetRoute
from daari.server.chat_route import ChatRoute
from daari.server.client_watch import ClientWatches
from daari.server.count_tokens import CountTokensRoute
from daari.server.guard import GuardPolicy, require_token_where_needed
from daari.server.limits import RequestLimits
from daari.server.observe_routes import ObserveRoutes
from daari.server.openapi import serve_openapi
from daari.server.responses_endpoints import ResponsesEndpoints
from daari.server.responses_routes import ResponsesRoutes
from daari.server.shadow_wiring import build_trust
from daari.server.status_routes import StatusRoutes
from daari.server.tail import TailRoute
from daari.sessions.economics import rates_for
from daari.sessions.hygiene import provider_id
from daari.sessions.store import SessionStore
from daari.tools.patterns import is_lt_command
from daari.trust.bars import LearnedBars

log = logging.getLogger("daari")


@dataclass(frozen=True)
class Parts:
    """What `compose` built. The request path never reaches into it: each piece was handed what it uses. Serving
    starts `table` and the app; tests and benches look inside."""

    config: Config
    health: Health
    metrics: Metrics
    table: ActorTable
    executors: Mapping[str, Executor]
    decisions: Hub[RoutingDecision]  # one RoutingDecision per request (pipeline/record.py)
    l0_memory: L0Memory
    key_memo: L0KeyMemo
    hit_requests: HitRequests
    body_work: BodyWork
    classify: ClassifyStep
    shortcuts: Mapping[str, ShortcutTier]  # by name, in SHORTCUT_ORDER
    pipeline: Pipeline
    tail: TailRoute
    responses: ResponseArchive
    app: DaariApp
    partition_secret: bytes | None  # None: one shared cache partition (no tier forwards client keys)
    log_secret: bytes | None  # keys the decision log's prompt hashes (log.prompts: hash)
    stopping: trio.Event  # set when daari starts shutting down
    sessions: SessionStore  # agent sessions: warm provider caches, thinking-block producers
    client_watches: ClientWatches  # routed requests' watch tasks: serving gives them its nursery
    generations: Generations  # the ExecutorActor's door: generations run in the asker's task (actors/executor.py)
    started_at: float = field(default=0.0)
    redis_link: RedisLink | None = None  # cache.backend: redis

    @property
    def cache(self) -> Address:
        return self.table.address("cache")

    @property
    def executor(self) -> Address:
        return self.table.address("executor")


def _mb(megabytes: float) -> int:
    return int(megabytes * 1024 * 1024)


def l0_memory(config: Config) -> L0Memory:
    l0 = config.cache.l0
    return L0Memory(_mb(l0.memory_mb), _mb(l0.max_pending_mb), l0.ttl_s)


def model_asker(config: Config, shield: Shield | None = None, spend: SideSpend | None = None
                ) -> Callable[[Generations], AskModel]:
    """How the verifier asks a model (cache.l1.verify: model): the configured verify tier, else the first tier;
    with none configured, model verdicts reject. A priced tier's verdicts are spend (purpose "verify", daari's)."""
    l1 = config.cache.l1
    tiers = config.configured_tiers()
    verify_tier = l1.verify_tier or (tiers[0] if tiers else None)
    if verify_tier not in tiers:  # not configured (or L6 with frontier off)
        verify_tier = None

    def asker(generations: Generations) -> AskModel:
        questions = SideQuestions(generations, shield, spend)

        async def ask_model(messages: list[Message]) -> str | None:
            if verify_tier is None:
                return None
            return await questions.ask(verify_tier, messages, config.tiers[verify_tier].model or "daari-verifier",
                                       max_tokens=3, purpose="verify")

        return ask_model

    return asker


async def _secret(data_dir: Path, purpose: str) -> bytes:
    try:
        return await trio.to_thread.run_sync(load_secret, data_dir)
    except OSError as exc:
        raise StartupError(f"cannot create the {purpose} secret in {data_dir}: {exc.strerror}; "
                           "choose another data dir with --data-dir or data_dir") from None


async def _answer_secret(config: Config) -> bytes | None:
    """Keys the shadow outcomes' answer hashes; without a readable secret they are unkeyed (and say so)."""
    try:
        return await trio.to_thread.run_sync(load_secret, Path(config.data_dir))
    except OSError as exc:
        log.warning("shadow answer hashes are not keyed: cannot read the data dir secret: %s", exc.strerror)
        return None


async def _log_secret(config: Config) -> bytes | None:
    if config.log.prompts == "none":
        return None
    try:
        return await trio.to_thread.run_sync(load_secret, Path(config.data_dir))
    except OSError as exc:  # an unwritable data dir: hashes stay unkeyed; the cache says so already
        log.warning("prompt hashes are not keyed: cannot read the data dir secret: %s", exc.strerror)
        return None


def shortcut_tiers(config: Config, table: ActorTable, shared: Shared, bars: LearnedBars | None = None
                   ) -> dict[str, ShortcutTier]:
    """The shortcut tiers the config turns on, by name."""
    tiers: dict[str, ShortcutTier] = {}
    tool_runner = table.get("tool_runner")  # in the table only with tools.enabled
    service = ToolService(config.tools, tool_runner) if tool_runner is not None else None
    if service is not None:
        tiers["CCS"] = CcsTier(service)
    if config.cache.l1.enabled:
        tiers["L1"] = SemanticTier(config.cache.l1, table.address("embedder"), shared.embedder_status,
                                   table.address("l1"), table.address("verifier"), shared.metrics,
                                   shared.index_stats, bars)
    if config.rules.enabled:
        tiers["L2"] = RulesTier(config.rules)
    if service is not None:
        tiers["Lt"] = ToolTier(service)
    return tiers


def org_semantic_tier(config: Config, table: ActorTable, shared: Shared, local: ShortcutTier | None
                      ) -> OrgSemanticTier | None:
    """L1-org (docs/redis.md, "Org cache"): over the request's tenant's org entries, when the local L1 is on. Its bar is
    the larger of the local threshold and cache.org.l1_similarity_threshold, without learned bars (they could
    lower it); the embedder and verifier are the local L1's."""
    if not isinstance(local, SemanticTier) or shared.org is None or table.get("l1_org") is None:
        return None
    l1 = config.cache.l1
    floor = config.cache.org.l1_similarity_threshold
    bar = replace(l1, similarity_threshold=max(l1.similarity_threshold, floor if floor is not None else 0.0),
                  draft_injection=False)
    inner = TenantSemanticTier(shared.org.tenant, bar, table.address("embedder"), shared.embedder_status,
                               table.address("l1_org"), table.address("verifier"), shared.metrics, memo_of=local)
    return OrgSemanticTier(inner, shared.metrics)


def upstreams_of(config: Config, executors: Mapping[str, Executor]) -> Upstreams:
    return Upstreams(
        providers={t: provider_id(ex.kind, config.tiers[t].base_url) for t, ex in executors.items()},
        kinds={t: ex.kind for t, ex in executors.items()},
        rates={t: rates_for(config.pricing, t, config.tiers[t].model) for t in executors})


def model_ids(config: Config, executors: Mapping[str, Executor]) -> list[str]:
    """The model names a client may ask for, without I/O: the tiers' own models, what their upstreams listed,
    the names a pass-through tier accepts and `routing.models` (globs left out)."""
    names = {"daari"}
    for tier, executor in executors.items():
        names.update(executor.model_names())
        names.update(executor.listed_models() or ())
        names.update(n for n in config.tiers[tier].models if not any(c in n for c in "*?["))
    names.update(n for n in config.routing.models if not any(c in n for c in "*?["))
    return ["daari", *sorted(names - {"daari"})]


async def privacy_guard(config: Config, tiers: list[str], metrics: Metrics) -> PrivacyGuard | None:
    """Redaction for the tiers outside this machine (docs/privacy.md); None when none is or it is all off."""
    remote = [t for t in tiers if is_remote(t, config.tiers[t])]
    privacy = config.privacy
    if not remote or (privacy.redact == "off" and not privacy.never_send):
        return None
    # Placeholders are keyed by the data dir's secret: stable across turns and restarts, unguessable elsewhere.
    key = await _secret(Path(config.data_dir), "placeholder")
    return PrivacyGuard(remote, privacy.redact, privacy.never_send, Redactor(key), metrics)


async def spend_ledger(config: Config, now: float) -> tuple[Ledger, SpendStore | None]:
    """This month's spend as it was when daari stopped (<data_dir>/spend.sqlite), and the store to add to."""
    ledger = Ledger()

    def open_store() -> SpendStore:
        store = SpendStore(Path(config.data_dir) / SPEND_FILE)
        ledger.load(store.rows(periods(now)["month"] + "-01"))
        return store

    try:
        return ledger, await trio.to_thread.run_sync(open_store)
    except (OSError, sqlite3.Error) as exc:  # spend is still counted and capped, from zero, until a restart
        log.warning("budget: cannot open %s in %s: %s; spend is counted in memory only", SPEND_FILE,
                    config.data_dir, exc)
        return ledger, None


async def compose(config: Config, *, shortcuts: Mapping[str, ShortcutTier] | None = None,
                  started_at: float = 0.0) -> Parts:
    """Build everything from `config`. `shortcuts` replaces shortcut tiers by name (tests and benches)."""
    policy = GuardPolicy.from_config(config.server)
    require_token_where_needed(config.server, policy)  # before anything is made: a refusal to start is cheap
    partition_secret = (await _secret(Path(config.data_dir), "cache partition")
                        if forwards_client_keys(config) else None)
    log_secret = await _log_secret(config)
    metrics = Metrics(tiers=config.configured_tiers())  # their series are on /metrics from the start
    health = Health()
    executors = make_executors(config)
    trust = build_trust(config)
    decisions: Hub[RoutingDecision] = Hub(default_buffer=256, on_drop=lambda name: metrics.inc(
        "decision_subscribers_dropped_total", subscriber=name))
    # Attached before anything is published, and it outlives the decision log actor's restarts.
    decision_queue = (DecisionQueue(decisions, config.log.queue_size, on_dropped=lambda count: metrics.inc(
        "decision_log_rows_dropped_total", count)) if config.log.decisions else None)
    redis = (RedisLink(LinkSettings.from_config(config.cache.redis), metrics, "cache")
             if config.cache.backend == "redis" else None)
    org = (OrgCache(OrgSettings.from_config(config.cache.org, key_tenants=partition_secret is not None), metrics,
                    config.cache.l0.ttl_s) if config.cache.org.url and config.cache.l0.enabled else None)
    shared = Shared(l0_memory(config), metrics, decisions, decision_queue, redis=redis, org=org)
    # Before anything that calls a tier: the answers, and the side calls (self-checks, the classifier's and the
    # verifier's questions, shadow calls) are all counted (docs/budget.md).
    ledger, spend_store = await spend_ledger(config, time.time())
    spend = SpendRecorder(ledger, spend_store, config.pricing, metrics, time.time,
                          {t: config.tiers[t].model for t in executors})
    if trust.sampling:
        shared.shadow = trust.deps(executors, shared, metrics, await _answer_secret(config), spend.side)
    # Before anything that may send a remote tier content: side questions and token counts are shielded too.
    privacy = await privacy_guard(config, [t for t in config.configured_tiers() if t in executors], metrics)
    shield = privacy.shield if privacy is not None else None
    table = actor_table(config, executors, shared, model_asker(config, shield, spend.side))
    executor = table.address("executor")

    tiers = shortcut_tiers(config, table, shared, trust.bars)
    for name, tier in (shortcuts or {}).items():
        tiers[name] = tier
    tiers = {name: tiers[name] for name in SHORTCUT_ORDER if name in tiers}

    body_work = BodyWork(config.server.thread_parse_bytes)
    key_memo, hit_requests = L0KeyMemo(), HitRequests()
    guard = CacheGuard(table.address("cache"), metrics)
    parse = ParseStep(body_work)
    questions = SideQuestions(shared.generations, shield, spend.side)
    configured = [t for t in config.configured_tiers() if t in executors]
    classify = ClassifyStep(partial(is_lt_command, min_confidence=config.tools.min_confidence)
                            if config.tools.enabled else no_lt_probe,
                            l3_task_types(config.routing.l3_task_types,
                                          config.tiers["L3"].executor if "L3" in config.tiers else None))
    routed: list[Step] = [AgentTurnStep(metrics), classify, *[ShortcutStep(tier) for tier in tiers.values()]]
    if org is not None:  # after the local L0 miss, first of the steps that wait on something outside daari
        routed.insert(0, OrgL0Step(org, guard))
    org_l1 = org_semantic_tier(config, table, shared, tiers.get("L1"))
    if org_l1 is not None:  # right after the local L1
        routed.insert(next(i for i, s in enumerate(routed) if s.name == "L1") + 1, ShortcutStep(org_l1))
    project = ProjectStep()
    if config.routing.slm_classifier and configured:  # the project first: the classifier's question is its spend
        routed += [project, RefineStep(configured[0], questions, classify.l3_task_types)]
    sessions = SessionStore()
    upstreams = upstreams_of(config, executors)
    # Local models' tool calls (made real from text by local/tool_repair.py) must match the tool's schema.
    schema_checked = [t for t in executors
                      if config.tiers[t].executor == "embedded" or repairs_tools(config.tiers[t])]
    plan = Tiers(configured, {t: ex.kind for t, ex in executors.items()},
                 {t: ex.supports_tools for t, ex in executors.items()}, config.routing.escalation,
                 config.routing.stream_escalation, policies(config.tiers))
    planners: list[Planner] = [
        ModelNames({t: config.tiers[t] for t in executors}, lambda t: executors[t].listed_models(),
                   partial(model_ids, config, executors)),
        ContextFit(plan, lambda t: executors[t].context_window()),
    ]
    if config.routing.session_affinity:
        planners.append(SessionAffinity(sessions, upstreams))
    caps = caps_of(config.budget)
    budget_planner: BudgetPlanner | None = None
    if caps:  # last: it sees the chain the other planners made and leaves out what would cross a cap
        budget_planner = BudgetPlanner(config.budget, caps, ledger, config.pricing,
                                       {t: config.tiers[t].model for t in executors}, plan, metrics, time.time)
        planners.append(budget_planner)
    if project not in routed:
        routed.append(project)
    routed += [ClientCallStep(config.routing.client_calls, config.routing.models), SessionStep(sessions),
               ExecuteStep(shared.generations, plan, Judge(config.confidence, questions, schema_checked), metrics,
                           planners=planners,
                           request_for=SessionHygiene(sessions, upstreams),
                           guard=privacy, on_attempt=spend.attempt)]
    render = RenderStep()
    indexes = [tier for tier in tiers.values() if isinstance(tier, AnswerIndex)] + ([org_l1] if org_l1 else [])
    pipeline = Pipeline(
        local=[HeadersStep(config.cache.l0.enabled, partition_secret),
               L0Step(memory=shared.memory, guard=guard, key_memo=key_memo, hit_requests=hit_requests,
                      body_work=body_work, parse=parse, org_after=org is not None),
               parse],
        routed=routed,
        # Shadow before render: a routed request's scope is cancelled when its client's connection reports the
        # response done (the client watch), so a step after render may never run; shadow never awaits.
        finish=[CacheWriteStep(guard, indexes, holds_secret if config.privacy.redact != "off" else None),
                *([OrgWriteStep(org)] if org is not None else []),
                SessionRecordStep(sessions, upstreams),
                ShadowStep(table.get("shadow"), trust.budget, trust.diversity, trust.skips, metrics,
                           budget_planner.under_soft_caps if budget_planner is not None else None), render],
        fail=render.fail,
    )

    stopping = trio.Event()
    describe_prompt: PromptDescriber | None = (partial(prompt_fields, config.log.prompts, log_secret)
                                               if config.log.prompts != "none" else None)
    archive = ResponseArchive(Path(config.data_dir) / "responses.sqlite", config.responses.keep,
                              config.responses.keep_total)
    limits = RequestLimits.from_config(config.server)
    chat = ChatRoute(pipeline, decisions, describe_prompt, limits)
    responses = ResponsesRoutes(chat, archive, partition_secret)
    endpoints = ResponsesEndpoints(config, executor, archive, partition_secret, spend.side)
    count_tokens = CountTokensRoute(config, executor, body_work, sessions, dict(upstreams.providers), shield)
    observe = ObserveRoutes(config.data_dir, metrics, trust.figures)
    tail = TailRoute(decisions, config.tail, stopping, metrics)
    l1 = tiers.get("L1")
    status = StatusRoutes(config, health, executor, metrics, started_at,
                          l1.health if isinstance(l1, SemanticTier) else None, lambda: tail.open,
                          partial(model_ids, config, executors),
                          components={**({"redis": redis.health} if redis is not None else {}),
                                      **({"org_cache": org.health} if org is not None else {})} or None,
                          gauges=redis.samples if redis is not None else None)
    routes = Routes(
        exact={
            "/": {"GET": status.root, "HEAD": status.root},
            "/v1/chat/completions": {"POST": chat},
            "/chat/completions": {"POST": chat},
            "/v1/messages": {"POST": chat},
            "/v1/messages/count_tokens": {"POST": count_tokens},
            "/v1/responses": {"POST": responses.create},
            "/responses": {"POST": responses.create},
            "/v1/responses/compact": {"POST": endpoints.compact},
            "/responses/compact": {"POST": endpoints.compact},
            "/v1/responses/input_tokens": {"POST": endpoints.input_tokens},
            "/responses/input_tokens": {"POST": endpoints.input_tokens},
            "/v1/models": {"GET": status.models},
            "/models": {"GET": status.models},
            "/healthz": {"GET": status.healthz},
            "/v1/daari/config": {"GET": status.show_config},
            "/metrics": {"GET": status.metrics_page},
            "/ui": {"GET": observe.ui},
            "/v1/daari/report": {"GET": observe.report},
            "/v1/daari/cache/diversity": {"GET": trust.diversity_route},
            "/v1/daari/budget": {"GET": BudgetRoute(config.budget, caps, ledger, time.time)},
            "/v1/daari/tail": {"GET": tail.over_http},  # the websocket is in `websocket`; plain HTTP: 426
            "/openapi.json": {"GET": serve_openapi},
        },
        prefixed=[(("/v1/models/", "/models/"), {"GET": status.model}),
                  (("/v1/responses/", "/responses/"), {"GET": responses.get, "DELETE": responses.delete})],
        chat=frozenset({chat, responses.create}),
        websocket={"/v1/daari/tail": tail},
    )
    app = DaariApp(routes, policy, decisions, metrics, limits)
    return Parts(config=config, health=health, metrics=metrics, table=table, executors=executors,
                 decisions=decisions, l0_memory=shared.memory, key_memo=key_memo, hit_requests=hit_requests,
                 body_work=body_work, classify=classify, shortcuts=tiers, pipeline=pipeline, tail=tail,
                 responses=archive, app=app, partition_secret=partition_secret, log_secret=log_secret,
                 stopping=stopping, started_at=started_at, sessions=sessions, redis_link=redis,
                 client_watches=chat.client_watches, generations=shared.generations)
