"""ShadowActor: asks a sampled answer again, in the background, and records whether the fresh answer agrees.

Samples are told by the finishing step (daari/pipeline/steps/shadow.py): a cache hit (L0, L1) is asked of the
tier that would have answered without the cache, a low tier's answer (L2-L4: a tier shadow eval) of the next
tier up. Each call is a background generation (actors/executor.py): it starts only on an idle slot nobody waits
for and gives the slot back to the first client that queues. A sample holds its worst-case tokens of the daily
budget before it starts. The comparison (daari/trust/compare.py) is recorded in the outcome store; an L1 entry
whose fresh answer disagrees is demoted; L1's learned bars are refit from the decided L1 samples.

A shadow call at a priced tier is billed: it is counted in the budget's spend (`spend`, purpose "shadow") to the
sampled request's project, client and session, once it ended, however it ended (docs/budget.md, "Side calls").

Work is bounded: `queue` samples wait at most (past it they are dropped and counted), one runs at a time (a
worker task), and each waits at most `wait_s` for its tier. Nothing here is on a request's path: the step only `tell`s.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import trio

from actors.embedder import Embed, EmbedderStatus
from actors.executor import Generations, Preempted
from actors.runtime import Actor, Address, Call, handles
from actors.semantic_cache import L1Demote
from daari.budget.payer import Payer, SideSpend
from daari.budget.project import project_of
from daari.config import ShadowConfig
from daari.errors import DaariError
from daari.executors.base import Collect
from daari.metrics import Metrics
from daari.protocol.chat import ChatRequest, Completion
from daari.protocol.events import Event, assemble
from daari.protocol.native_only import native_only_reason
from daari.protocol.tokens import estimate_request_tokens, estimate_text_tokens
from daari.trust.bars import LearnedBars, Sample
from daari.trust.compare import Comparison, compare_answers, needs_embedding
from daari.trust.diversity import Diversity, DiversityTracker
from daari.trust.plan import Planned, TierFacts, cache_tier, next_tier_up
from daari.trust.sampling import ShadowBudget
from daari.trust.store import Outcome, ShadowArchive, ShadowStore, answer_hash

log = logging.getLogger("daari.shadow")

SNAPSHOT_S = 60.0  # skip counts and the diversity snapshot are written (and old outcomes pruned) this often
BAR_SAMPLES = 5000  # the latest decided L1 samples per task type the bars are fit on


@dataclass(slots=True)  # made on the request path: not frozen, whose __init__ sets each field the slow way
class ShadowSample(Call[None]):
    """One answer to ask again. `request` is the parsed request as the client sent it; `cached` what it got.
    Read-only by convention once told."""

    kind: str  # "cache" (level L0 / L1) or "tier" (level L2 / L3 / L4)
    level: str
    request: ChatRequest
    cached: Completion
    task_type: str | None
    rule_id: str | None
    ceiling: str | None
    client: str
    entry_id: int | None = None  # the L1 entry served
    similarity: float | None = None  # its lookup similarity
    override: str | None = None  # X-Daari-Tier-Override: the tier that would have answered is that one
    payer: Payer | None = None  # whose spend the shadow call is (the sampled request's project, client, session)
    directory: str | None = None  # the request's directory when its project was not looked up yet (a cache hit)


@dataclass(frozen=True)
class ShadowIdle(Call[int]):
    """Answered once no sample is waiting or running, with the outcomes recorded so far (tests and the bench)."""


@dataclass
class ShadowDeps:
    """What the actor is given at start (server/compose.py builds it)."""

    config: ShadowConfig
    generations: Generations  # the ExecutorActor's door: each call runs in the worker's task
    configured: list[str]  # tiers in escalation order
    facts: dict[str, TierFacts]
    archive: ShadowArchive
    budget: ShadowBudget
    bars: LearnedBars
    diversity: DiversityTracker
    metrics: Metrics
    skips: Counter[str]  # shared with the step, which counts what it drops
    l1: Address | None = None
    embedder: Address | None = None
    embedder_status: EmbedderStatus | None = None
    keep_texts: bool = False  # log.prompts: full
    keep_days: float = 30.0  # log.retention_days: older outcomes are pruned
    secret: bytes | None = None  # keys the answers' hashes
    spend: SideSpend | None = None  # counts a shadow call's cost in the budget (SpendRecorder.side)
    l1_samples: dict[str, deque[Sample]] = field(default_factory=dict)


class ShadowActor(Actor):
    name = "shadow"

    def __init__(self, deps: ShadowDeps) -> None:
        self.deps = deps
        self.pending = 0  # samples queued or running
        self.recorded = 0
        self._queue, self._samples = trio.open_memory_channel[ShadowSample](deps.config.queue)
        self._idle = trio.Event()
        self._idle.set()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        deps = self.deps
        day = int(deps.budget.clock() // 86_400)
        spent, samples = await deps.archive.run(lambda s: (s.spent_on(day), s.l1_samples()))
        deps.budget.restore(spent)
        deps.l1_samples.clear()  # a restarted actor reads them again from the store
        for task, similarity, disagreed in reversed(samples):  # oldest first
            self._bar_sample(task, Sample(similarity, disagreed))
        deps.bars.fit(deps.l1_samples)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._snapshots)
                nursery.start_soon(self._worker, self._samples)
                yield
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await self._snapshot()

    async def _snapshots(self) -> None:
        while True:
            await trio.sleep(SNAPSHOT_S)
            await self._snapshot()

    async def _snapshot(self) -> None:
        deps = self.deps
        skips = dict(deps.skips)
        deps.skips.clear()
        rows = deps.diversity.summary()
        try:
            await deps.archive.run(lambda store: _save(store, skips, rows, deps.keep_days * 86_400))
        except Exception:  # a full or read-only disk loses a snapshot, not the server
            log.exception("shadow: cannot write the skip counts and diversity snapshot")

    @handles(ShadowSample)
    async def sample(self, sample: ShadowSample) -> None:
        """Queued for the worker (never waits): past `queue` waiting samples it is dropped, counted."""
        try:
            self._queue.send_nowait(sample)
        except trio.WouldBlock:
            self._skip("queue_full")
            return
        self.pending += 1
        if self._idle.is_set():
            self._idle = trio.Event()

    async def _worker(self, samples: trio.MemoryReceiveChannel[ShadowSample]) -> None:
        """One sample at a time: a shadow call is background work, and one is plenty of it."""
        async for sample in samples:
            try:
                await self._process(sample)
            except Exception:
                log.exception("shadow sample failed")
                self._skip("error")
            finally:
                self.pending -= 1
                if self.pending == 0:
                    self._idle.set()

    @handles(ShadowIdle, concurrent=True)
    async def idle(self, request: ShadowIdle) -> int:
        while self.pending:
            await self._idle.wait()
        return self.recorded

    def _skip(self, reason: str) -> None:
        self.deps.skips[reason] += 1
        self.deps.metrics.inc("shadow_skipped_total", reason=reason)

    def _plan(self, sample: ShadowSample) -> Planned:
        deps = self.deps
        if sample.kind == "cache":
            return cache_tier(sample.ceiling, deps.configured, deps.facts, in_process=deps.config.in_process,
                              override=sample.override)
        return next_tier_up(sample.level, deps.configured, deps.facts, in_process=deps.config.in_process)

    async def _process(self, sample: ShadowSample) -> None:
        deps = self.deps
        planned = self._plan(sample)
        if planned.tier is None:
            self._skip(planned.skip or "no_tier")
            return
        if native_only_reason(sample.request) is not None:
            self._skip("native_only")
            return
        request = shadow_request(sample.request, deps.config.max_answer_tokens)
        max_tokens = request.max_tokens or deps.config.max_answer_tokens
        prompt_estimate = estimate_request_tokens(request)
        reserved = deps.budget.reserve(prompt_estimate, max_tokens)
        if reserved is None:
            self._skip("daily_budget")
            return
        spent = 0
        try:
            fresh, spent = await self._ask(planned.tier, request, prompt_estimate, sample)
        finally:
            deps.budget.settle(reserved, spent)  # no await here: a cancelled call still gives its tokens back
        if spent:
            day = int(deps.budget.clock() // 86_400)
            await deps.archive.run(lambda s: s.add_spent(day, spent))
        if fresh is None:
            return
        if fresh.tool_calls or sample.cached.tool_calls:
            self._skip("tool_calls")
            return
        comparison = await self._compare(sample.cached, fresh)
        if fresh.finish_reason == "length" and sample.cached.finish_reason != "length":
            comparison = Comparison("undecided", "truncated", comparison.similarity)  # cut at max_answer_tokens
        await self._record(sample, planned.tier, fresh, comparison, spent)

    async def _ask(self, tier: str, request: ChatRequest, prompt_estimate: int, sample: ShadowSample
                   ) -> tuple[Completion | None, int]:
        """The fresh answer and the tokens it spent (None and what a cut-short call may have cost)."""
        events: list[Event] = []
        try:
            return await self._call(tier, request, prompt_estimate, events)
        finally:
            if self.deps.spend is not None and events:  # the upstream started answering: it billed the call
                with trio.CancelScope(shield=True):
                    await self.deps.spend("shadow", await _payer(sample), tier, request, events)

    async def _call(self, tier: str, request: ChatRequest, prompt_estimate: int, events: list[Event]
                    ) -> tuple[Completion | None, int]:
        with trio.move_on_after(self.deps.config.wait_s) as waited:
            try:
                await self.deps.generations.run(tier, request, Collect(events), background=True)
            except Preempted:
                self._skip("preempted")
                return None, prompt_estimate  # the upstream may have read the prompt before it was cut off
            except DaariError as err:
                self._skip("tier_failed")
                log.info("shadow call to %s failed: %s", tier, err.message)
                return None, 0
        if waited.cancelled_caught:
            self._skip("tier_busy")
            return None, prompt_estimate if events else 0
        try:
            completion = assemble(events)
        except ValueError:
            self._skip("tier_failed")
            return None, prompt_estimate
        usage = completion.usage
        spent = (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
        if not spent:
            spent = prompt_estimate + estimate_text_tokens(completion.text)
        return completion, spent

    async def _compare(self, cached: Completion, fresh: Completion) -> Comparison:
        similarity = None
        if needs_embedding(cached.text, fresh.text):
            similarity = await self._similarity(cached.text, fresh.text)
        return compare_answers(cached.text, fresh.text, similarity)

    async def _similarity(self, a: str, b: str) -> float | None:
        deps = self.deps
        if deps.embedder is None or deps.embedder_status is None or not deps.embedder_status.ready:
            return None
        try:
            first = await deps.embedder.call(Embed(a))
            second = await deps.embedder.call(Embed(b))
        except DaariError:
            return None
        return round(float(np.dot(first.vector, second.vector)), 4)

    async def _record(self, sample: ShadowSample, tier: str, fresh: Completion, comparison: Comparison,
                      spent: int) -> None:
        deps = self.deps
        demoted = False
        if (sample.kind == "cache" and sample.level == "L1" and comparison.outcome == "disagree"
                and sample.entry_id is not None and deps.l1 is not None):
            try:
                demoted = await deps.l1.call(L1Demote(sample.entry_id))
            except DaariError as err:
                log.warning("shadow: could not demote L1 entry %s: %s", sample.entry_id, err.message)
            if demoted:
                deps.metrics.inc("shadow_demoted_total")
        outcome = Outcome(
            kind=sample.kind, level=sample.level, asked_tier=tier, task_type=sample.task_type,
            rule_id=sample.rule_id, client=sample.client, outcome=comparison.outcome, reason=comparison.reason,
            cached_hash=answer_hash(sample.cached.text, deps.secret), fresh_hash=answer_hash(fresh.text, deps.secret),
            tokens=spent, entry_id=sample.entry_id, similarity=sample.similarity,
            answer_similarity=comparison.similarity, demoted=demoted,
            cached_text=sample.cached.text if deps.keep_texts else None,
            fresh_text=fresh.text if deps.keep_texts else None)
        await deps.archive.run(lambda s: s.add(outcome))
        self.recorded += 1
        deps.metrics.inc("shadow_samples_total", kind=sample.kind, level=sample.level, outcome=comparison.outcome)
        if sample.kind == "tier":
            deps.metrics.inc("shadow_tier_evals_total", tier=sample.level, asked=tier, outcome=comparison.outcome)
        if (sample.kind == "cache" and sample.level == "L1" and sample.similarity is not None
                and comparison.outcome != "undecided"):
            self._bar_sample(sample.task_type or "unknown", Sample(sample.similarity,
                                                                    comparison.outcome == "disagree"))
            deps.bars.fit(deps.l1_samples)

    def _bar_sample(self, task: str, sample: Sample) -> None:
        samples = self.deps.l1_samples.setdefault(task, deque(maxlen=BAR_SAMPLES))
        samples.append(sample)


async def _payer(sample: ShadowSample) -> Payer | None:
    """The sampled request's payer, with its project looked up now when the hit came before the project step."""
    payer = sample.payer
    if payer is None or payer.project or not sample.directory:
        return payer
    with trio.move_on_after(1.0):  # a hung file system costs the shadow call its project, not the worker
        project = await trio.to_thread.run_sync(project_of, sample.directory, abandon_on_cancel=True)
        return replace(payer, project=project)
    return payer


def _save(store: ShadowStore, skips: dict[str, int], rows: list[Diversity], keep_s: float) -> None:
    store.add_skips(skips)
    store.save_diversity(rows)
    store.prune(time.time() - keep_s)


def shadow_request(request: ChatRequest, max_answer_tokens: int) -> ChatRequest:
    """The request as a shadow call sends it: whole (not streamed), with no client header (no credential), the
    client's body not passed through (its own max_tokens could not be capped), and an answer capped at
    `max_answer_tokens` (or the client's lower cap)."""
    cap = request.max_tokens
    max_tokens = min(cap, max_answer_tokens) if cap is not None else max_answer_tokens
    sampling = {**request.sampling, "max_tokens": max(1, math.floor(max_tokens))}
    sampling.pop("max_completion_tokens", None)
    return replace(request, stream=False, passthrough_headers={}, raw={}, query_string="", sampling=sampling,
                   include_usage=True)


