"""Routing spec steps 10-12: execute at a tier, judge the answer, escalate while it is weak.

Reads: `turn.classification` (ceiling, whether it may escalate), the tier override, the request (tools it needs
answered as tool calls, parts only a native tier can read). Decides: the tier chain (daari_meta.attempts records
every tier tried, skipped or failed) and the answer, with whether L0 may store it.

Each generation runs in the request's own task, on a slot the ExecutorActor lends it (actors/executor.py,
`Generations`): the request's scope cancelled (a client that left, included) ends it, frees the tier's slot and
closes the upstream connection. Every attempt whose upstream
started answering goes to `on_attempt` once it ended, however it ended (answered, escalated past, cut off): the
budget counts what the upstream billed, once per attempt. A stream that reaches the client live (the last tier,
or every tier with `routing.stream_escalation: live`) cannot escalate once its first event went out.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.executor import Generations
from daari.errors import DaariError, ToolCallsUnsupportedLocally, UpstreamError
from daari.executors.base import Collect, DownstreamFailed
from daari.metrics import Metrics
from daari.pipeline.hosted_tools import DropLog, settle_dropped
from daari.pipeline.live_relay import LiveRelay
from daari.pipeline.meta import Attempt
from daari.pipeline.native_only import native_tiers
from daari.pipeline.payer import payer_of
from daari.pipeline.step import Answer
from daari.pipeline.steps.judge import Judge, Judgement
from daari.pipeline.turn import Turn
from daari.protocol.chat import ChatRequest, Completion
from daari.protocol.events import Event, assemble
from daari.routing.agent_turn import needs_tool_calls
from daari.routing.plan import plan_tiers
from daari.trust.draft import with_draft


@dataclass(frozen=True)
class Tiers:
    """What the execute step knows of the configured tiers, fixed at start."""

    configured: Sequence[str]  # in escalation order, L6 only when frontier is enabled
    kinds: Mapping[str, str]  # tier -> executor kind ("embedded", "openai", "anthropic", ...)
    tools_capable: Mapping[str, bool]  # tier -> whether its executor can produce tool calls
    escalation: bool = True  # routing.escalation
    stream_escalation: str = "buffer"  # routing.stream_escalation: "buffer" | "live"
    hosted_tools: Mapping[str, str] = field(default_factory=dict)  # tier -> "drop" | "refuse" (hosted_tools.py)


# A planner narrows or reorders the tier chain (context windows, model names, session affinity) and records why
# in the turn's daari_meta; a request shaper gives the request as one tier must receive it (thinking hygiene).
Planner = Callable[[Turn, list[str]], list[str]]
RequestFor = Callable[[Turn, str], ChatRequest]
# An attempt at a tier ended (its answer complete, or cut off by the client leaving or the upstream breaking off)
# after these events arrived. It may be called in a cancelled scope: what it must finish, it shields.
AttemptEnded = Callable[[Turn, str, list[Event]], Awaitable[None]]


class AnswerFilter(Protocol):
    """Rewrites a tier's events on their way to the client (privacy/restore.py); `restored` > 0 means the answer
    now holds what must not be cached."""

    restored: int

    def feed(self, event: Event) -> list[Event]: ...


class TierGuard(Protocol):
    """The last word on what one tier is sent, and the filter its answer goes through (steps/privacy.py)."""

    def prepare(self, turn: Turn, tier: str, request: ChatRequest) -> tuple[ChatRequest, AnswerFilter | None]: ...


def _as_sent(turn: Turn, tier: str) -> ChatRequest:
    return turn.request


class ExecuteStep:
    name = "execute"

    def __init__(self, generations: Generations, tiers: Tiers, judge: Judge, metrics: Metrics,
                 drop_log: DropLog | None = None, planners: Sequence[Planner] = (),
                 request_for: RequestFor = _as_sent, guard: TierGuard | None = None,
                 on_attempt: AttemptEnded | None = None) -> None:
        self.generations = generations
        self.tiers = tiers
        self.judge = judge
        self.metrics = metrics
        self.drop_log = drop_log or DropLog()  # hosted tools a tier answered without: logged once per session
        self.planners = tuple(planners)
        self.request_for = request_for
        self.guard = guard
        self.on_attempt = on_attempt

    def __call__(self, turn: Turn) -> Coroutine[Any, Any, Answer | None]:
        """The tier chain planned here, the attempts run by `_escalate`'s coroutine, which the pipeline awaits
        directly: this step is no frame of its own, resumed at every wait of the generation below it."""
        classification = turn.classification
        assert classification is not None, "the classify step runs before execute"
        tiers, override = self.tiers, turn.controls.tier_override
        configured = list(tiers.configured)
        chain = plan_tiers(classification.ceiling, configured, override,
                           tiers.escalation and classification.escalate)
        chain = native_tiers(turn.request, chain, configured, dict(tiers.kinds), turn.meta.attempts,
                             override is not None, tiers.hosted_tools)
        chain = self._tool_capable(turn, chain)
        for planner in self.planners:
            chain = planner(turn, chain)
        return self._escalate(turn, chain)

    def _tool_capable(self, turn: Turn, chain: list[str]) -> list[str]:
        """An agent turn that defines tools goes only to tiers whose executor can emit tool calls."""
        if not needs_tool_calls(turn.request):
            return chain
        capable_of = self.tiers.tools_capable
        capable = [t for t in chain if capable_of.get(t)]
        for tier in chain:
            if tier not in capable:
                turn.meta.attempts.append(Attempt(tier, "skipped_no_tools"))
        # Escalating past the classified ceiling to the frontier is allowed here: it is the only tier left.
        frontier_ok = "L6" in self.tiers.configured and capable_of.get("L6")
        if not capable and turn.controls.tier_override is None and frontier_ok:
            capable = ["L6"]
        if not capable:
            turn.meta.error = "tool_calls_unsupported_locally"
            raise ToolCallsUnsupportedLocally(
                "this request defines tools and no configured tier can produce tool calls "
                "(the embedded model cannot); enable frontier (L6) or configure an OpenAI-compatible "
                "or Ollama tier that supports tools",
                code="tool_calls_unsupported_locally",
            )
        return capable

    async def _escalate(self, turn: Turn, chain: list[str]) -> Answer:
        meta, request, sink = turn.meta, turn.request, turn.sink
        live_mode = self.tiers.stream_escalation == "live"
        best: tuple[Judgement, str, Completion, list[Event]] | None = None
        last_error: DaariError | None = None
        for index, tier in enumerate(chain):
            final = index == len(chain) - 1
            live = request.stream and (final or live_mode)
            began = time.time()  # the attempt's own interval, for its trace span
            try:
                events, holds_secrets = await (self._stream_live(turn, tier) if live
                                               else self._collect(turn, tier))
                completion = _assemble(events, tier)
            except DaariError as err:
                if sink.stream_opened:
                    raise
                meta.attempts.append(Attempt(tier, "failed", error=err.code or type(err).__name__, started=began,
                                             ended=time.time()))
                self.metrics.inc("tier_failures_total", tier=tier, code=err.code or "error")
                last_error = err
                continue
            # A self-evaluation costs a second call: run it only where its verdict can still change the route.
            verdict = await self.judge(tier, request, completion, allow_self_eval=not (live or final),
                                       task_type=meta.task_type, rule_id=meta.rule_id, payer=payer_of(turn))
            if verdict.passed or final or sink.stream_opened:
                meta.attempts.append(Attempt(tier, "accepted" if verdict.passed else "low_confidence",
                                             verdict.score, violations=verdict.reasons, started=began,
                                             ended=time.time()))
                if not verdict.passed:
                    meta.warning = "below_confidence_threshold"
                    if best is not None and best[0].score > verdict.score and not sink.stream_opened:
                        verdict, tier, completion, events = best
                # Only an answer that passed its tier's judge is stored: a weak one (served with the warning
                # because nothing above could do better) is never replayed from the cache as if it were good.
                # An answer with restored secrets in it is never cached: they stay out of the stores on disk.
                return self._answer(turn, tier, completion, events, verdict,
                                    store=verdict.cacheable and verdict.passed and not holds_secrets)
            meta.attempts.append(Attempt(tier, "low_confidence", verdict.score, violations=verdict.reasons,
                                         started=began, ended=time.time()))
            self.metrics.inc("escalations_total", tier=tier)
            if best is None or verdict.score > best[0].score:
                best = (verdict, tier, completion, events)
        if best is not None:
            verdict, tier, completion, events = best
            meta.warning = "below_confidence_threshold"
            return self._answer(turn, tier, completion, events, verdict, store=False)
        assert last_error is not None
        raise last_error

    def _answer(self, turn: Turn, tier: str, completion: Completion, events: list[Event], verdict: Judgement, *,
                store: bool) -> Answer:
        completion.native = turn.wire.capture_native(events)  # the upstream's own message, kept with the answer
        if not turn.sink.stream_opened:
            self._dropped(turn, tier)
        return Answer(tier, self._kind(tier), completion, events, verdict.score, store)

    def _dropped(self, turn: Turn, tier: str) -> None:
        """The hosted tools the answering tier runs without (daari_meta.dropped_tools, a response header)."""
        turn.meta.dropped_tools = settle_dropped(turn.request, tier, self.tiers.kinds.get(tier), self.drop_log)

    def _kind(self, tier: str) -> str:
        return self.tiers.kinds.get(tier, "shortcut")

    def _prepare(self, turn: Turn, tier: str) -> tuple[ChatRequest, AnswerFilter | None]:
        """The request as `tier` is sent it, and the filter its answer goes through."""
        request, answer_filter = self.request_for(turn, tier), None
        if turn.draft is not None:
            request = with_draft(request, turn.draft)
        if self.guard is not None:
            request, answer_filter = self.guard.prepare(turn, tier, request)
        return request, answer_filter

    async def _collect(self, turn: Turn, tier: str) -> tuple[list[Event], bool]:
        request, answer_filter = self._prepare(turn, tier)
        events: list[Event] = []
        try:
            await self.generations.run(tier, request, Collect(events, answer_filter.feed if answer_filter else None))
        finally:
            await self._ended(turn, tier, events)
        return events, answer_filter is not None and self._restored(tier, answer_filter)

    async def _stream_live(self, turn: Turn, tier: str) -> tuple[list[Event], bool]:
        """Stream as events arrive; the response starts with the first event, so earlier faults can escalate.

        The relay (daari/pipeline/live_relay.py) is the generation's emit: the executor, in this task, renders and
        writes each upstream read's events in one write where it marks its reads, each event as it comes where it
        does not; no event waits for a later one."""
        request, answer_filter = self._prepare(turn, tier)
        relay = LiveRelay(turn, tier, self._kind(tier), answer_filter.feed if answer_filter is not None else None,
                          lambda: self._dropped(turn, tier))
        try:
            await self.generations.run(tier, request, relay)
        except DownstreamFailed:
            if relay.failure is None:
                raise
            raise relay.failure from None  # the client's side, as if this task's own write had failed
        finally:
            await self._ended(turn, tier, relay.events)
        return relay.events, answer_filter is not None and self._restored(tier, answer_filter)

    async def _ended(self, turn: Turn, tier: str, events: list[Event]) -> None:
        """The attempt ended, its answer complete or not, after the upstream had started answering: tell the budget
        here, the one place each attempt passes once (so none is counted twice, whichever answer is served).
        The request's scope may be cancelled (the client left): the hook shields what it awaits itself, so an
        attempt that costs nothing (a local tier, a free model) does not pay for a shielded scope."""
        if self.on_attempt is None or not events:
            return
        await self.on_attempt(turn, tier, events)

    def _restored(self, tier: str, answer_filter: AnswerFilter) -> bool:
        if answer_filter.restored:
            self.metrics.inc("privacy_restored_total", answer_filter.restored, tier=tier)
        return answer_filter.restored > 0


def _assemble(events: list[Event], tier: str) -> Completion:
    try:
        return assemble(events)
    except ValueError:
        raise UpstreamError(f"tier {tier} ended its answer without finishing it (truncated stream)",
                            upstream=tier) from None
