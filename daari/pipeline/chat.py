"""One chat request through the pipeline (routing spec steps 2-3 and 9-14).

L0 lookup, classification, the tier plan, execution with confidence-based escalation, the L0 write, and
the response with daari_meta. The request is a task, not an actor: it asks the CacheActor and the
ExecutorActor, and every generation it opens lives inside its own cancel scope.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager

from actors.executor import OpenGeneration
from actors.runtime import StreamReader
from daari.cache.l0_key import l0_key
from daari.cache.l0_store import L0Entry
from daari.config import TIER_NAMES
from daari.errors import DaariError, NotFound, ToolCallsUnsupportedLocally, UpstreamError
from daari.pipeline.cache_guard import CacheGuard
from daari.pipeline.controls import Controls
from daari.pipeline.judge import Judgement, judge
from daari.pipeline.meta import Attempt, Meta
from daari.pipeline.native_only import native_tiers
from daari.pipeline.runtime import Runtime
from daari.pipeline.shortcuts import SHORTCUT_ORDER, ShortcutQuery, shortcut_tiers
from daari.pipeline.side_query import ask_tier
from daari.pipeline.sink import Sink
from daari.protocol.chat import ChatRequest, Completion
from daari.protocol.events import Event, assemble, replay
from daari.protocol.wire import StreamRenderer, Wire
from daari.routing.agent_turn import is_agent_turn, needs_tool_calls
from daari.routing.classifier import Classification, classify
from daari.routing.plan import plan_tiers
from daari.routing.slm_classifier import apply_verdict, classifier_messages, parse_verdict

log = logging.getLogger("daari.pipeline")

STORABLE_FINISH = ("stop", "length", "tool_calls", "stop_sequence")


def uses_l0(rt: Runtime, controls: Controls) -> bool:
    """Whether a request reads and stores L0: the cache is on and the client did not send X-Daari-No-Cache."""
    return rt.config.cache.l0.enabled and not controls.no_cache


class ChatTurn:
    # One per request: slots, no per-instance dict (less to allocate and for the GC to walk).
    __slots__ = ("rt", "partition", "headers", "request", "controls", "wire", "sink", "meta", "started",
                 "renderer", "cache_on", "key", "cache")

    def __init__(self, rt: Runtime, request: ChatRequest, controls: Controls, wire: Wire, sink: Sink,
                 headers: Mapping[str, str] | None = None, partition: str = "") -> None:
        self.rt = rt
        self.partition = partition  # the caller's credential partition of the cache (cache/partition.py)
        self.headers: Mapping[str, str] = headers or {}
        self.request = request
        self.controls = controls
        self.wire = wire
        self.sink = sink
        self.meta = Meta()  # agent_turn: from the L0 entry on a hit, else worked out in `run`
        self.started = time.perf_counter()
        self.renderer: StreamRenderer | None = None
        self.cache_on = uses_l0(rt, controls)
        if not self.cache_on:
            self.meta.cache = "off" if not rt.config.cache.l0.enabled else "skipped"
        self.key = ""
        self.cache = CacheGuard(rt, self.meta)

    async def serve_from_cache(self) -> bool:
        """Answer from L0 if the request is there (routing spec step 3); True when the request is done.

        Runs before anything slow, so the server can skip its disconnect watcher for a hit.
        """
        try:
            if not self.cache_on:
                return False  # no key needed: nothing is read or stored
            self.key = self.key or self.cache_key()  # the server usually has it already (pipeline/request_key.py)
            entry = await self.cache.get(self.key)
        except DaariError as err:
            await self._fail(err)
            return True
        except Exception:
            log.exception("L0 lookup failed")
            await self._fail(DaariError("internal error in daari; see the server log"))
            return True
        if entry is None:
            return False
        await self.serve_entry(entry)
        return True

    async def serve_entry(self, entry: L0Entry) -> None:
        """Answer from `entry`, this request's L0 entry (looked up by `serve_from_cache` or the hit lane)."""
        try:
            await self._serve_hit(entry)
        except DaariError as err:
            await self._fail(err)
        except Exception:
            log.exception("answering from L0 failed")
            await self._fail(DaariError("internal error in daari; see the server log"))

    def cache_key(self) -> str:
        """The request's L0 key (normalize + canonical JSON + SHA-256): pure, so it may run on a thread."""
        return l0_key(self.request, self.controls.tier_override, self.partition).digest

    async def run(self) -> None:
        """Everything after an L0 miss (steps 4-14)."""
        self.meta.agent_turn = is_agent_turn(self.request)
        try:
            await self._route()
        except DaariError as err:
            await self._fail(err)
        except Exception:
            log.exception("pipeline failed")
            await self._fail(DaariError("internal error in daari; see the server log"))

    async def _route(self) -> None:
        request, key = self.request, self.key
        if self.controls.tier_override == "L0":
            raise NotFound("X-Daari-Tier-Override: L0 was asked for and there is no L0 entry for this request",
                           code="l0_miss")
        classification = classify(request)
        self._classified(classification)
        if self.controls.tier_override is None and await self._try_shortcuts(key):
            return
        if self.rt.config.routing.slm_classifier and classification.ambiguous and self.controls.tier_override is None:
            classification = await self._hybrid_classify(classification)
            self._classified(classification)
        chain = plan_tiers(classification.ceiling, self.rt.config.configured_tiers(),
                           self.controls.tier_override,
                           self.rt.config.routing.escalation and classification.escalate)
        chain = native_tiers(request, chain, self.rt.config.configured_tiers(), self.rt.executor_kinds,
                             self.meta.attempts, self.controls.tier_override is not None)
        await self._execute(key, self._tool_capable(chain))

    def _classified(self, classification: Classification) -> None:
        self.meta.task_type = classification.task_type
        self.meta.rule_id = classification.rule_id
        self.meta.ceiling = classification.ceiling

    async def _hybrid_classify(self, heuristic: Classification) -> Classification:
        """Phase B: the first configured tier classifies an ambiguous request; any failure keeps the heuristic."""
        tiers = self.rt.config.configured_tiers()
        reply = await ask_tier(self.rt, tiers[0], classifier_messages(self.request), self.request.model,
                               max_tokens=64)
        verdict = parse_verdict(reply) if reply is not None else None
        if verdict is not None and verdict.suggested_tier not in TIER_NAMES:
            verdict = None
        self.meta.classifier = "slm" if verdict is not None else "slm_fallback"
        return apply_verdict(heuristic, verdict)

    def _shortcut_query(self, key: str) -> ShortcutQuery:
        return ShortcutQuery(self.request, self.headers, key if self.cache_on else "",
                             partition=self.partition, agent_turn=self.meta.agent_turn)

    async def _try_shortcuts(self, key: str) -> bool:
        query = self._shortcut_query(key)
        for tier in shortcut_tiers(self.meta.agent_turn, self.rt.shortcuts):
            shortcut = self.rt.shortcuts.get(tier)
            if shortcut is None:
                continue
            result = await shortcut.answer(query)
            if result is None:
                continue
            self.meta.details.update(result.details)
            if result.completion is None:
                continue
            completion = result.completion
            if result.task_type is not None:
                self.meta.task_type = result.task_type
            if result.rule_id is not None:
                self.meta.rule_id = result.rule_id
            await self._answer(key, result.tier, completion, list(replay(completion)),
                               Judgement(result.confidence, "shortcut", True), store=False)
            return True
        return False

    def _tool_capable(self, chain: list[str]) -> list[str]:
        """An agent turn that defines tools goes only to tiers whose executor can emit tool calls."""
        if not needs_tool_calls(self.request):
            return chain
        capable = [t for t in chain if self.rt.tools_capable.get(t)]
        for tier in chain:
            if tier not in capable:
                self.meta.attempts.append(Attempt(tier, "skipped_no_tools"))
        # Escalating past the classified ceiling to the frontier is allowed here: it is the only tier left.
        frontier_ok = "L6" in self.rt.config.configured_tiers() and self.rt.tools_capable.get("L6")
        if not capable and self.controls.tier_override is None and frontier_ok:
            capable = ["L6"]
        if not capable:
            self.meta.error = "tool_calls_unsupported_locally"
            raise ToolCallsUnsupportedLocally(
                "this request defines tools and no configured tier can produce tool calls "
                "(the embedded model cannot); enable frontier (L6) or configure an OpenAI-compatible "
                "or Ollama tier that supports tools",
                code="tool_calls_unsupported_locally",
            )
        return capable

    async def _execute(self, key: str, chain: list[str]) -> None:
        meta = self.meta
        mode = self.rt.config.routing.stream_escalation
        best: tuple[Judgement, str, Completion, list[Event]] | None = None
        last_error: DaariError | None = None
        for index, tier in enumerate(chain):
            final = index == len(chain) - 1
            live = self.request.stream and (final or mode == "live")
            try:
                events = await (self._stream_live(tier) if live else self._collect(tier))
                completion = _assemble(events, tier)
            except DaariError as err:
                if self.sink.stream_opened:
                    raise
                meta.attempts.append(Attempt(tier, "failed", error=err.code or type(err).__name__))
                self.rt.metrics.inc("tier_failures_total", tier=tier, code=err.code or "error")
                last_error = err
                continue
            # A self-evaluation costs a second call: run it only where its verdict can still change the route.
            verdict = await judge(self.rt, tier, self.request, completion, allow_self_eval=not (live or final),
                                  task_type=meta.task_type, rule_id=meta.rule_id)
            if verdict.passed or final or self.sink.stream_opened:
                meta.attempts.append(Attempt(tier, "accepted" if verdict.passed else "low_confidence",
                                             verdict.score, violations=verdict.reasons))
                if not verdict.passed:
                    meta.warning = "below_confidence_threshold"
                    if best is not None and best[0].score > verdict.score and not self.sink.stream_opened:
                        verdict, tier, completion, events = best
                # A weak answer is stored only when no better tier could have been asked; a gated one never.
                await self._answer(key, tier, completion, events, verdict,
                                   store=verdict.cacheable and (verdict.passed or len(chain) == 1))
                return
            meta.attempts.append(Attempt(tier, "low_confidence", verdict.score, violations=verdict.reasons))
            self.rt.metrics.inc("escalations_total", tier=tier)
            if best is None or verdict.score > best[0].score:
                best = (verdict, tier, completion, events)
        if best is not None:
            verdict, tier, completion, events = best
            meta.warning = "below_confidence_threshold"
            await self._answer(key, tier, completion, events, verdict, store=False)
            return
        assert last_error is not None
        raise last_error

    def _open(self, tier: str) -> AbstractAsyncContextManager[StreamReader[Event]]:
        """The generation is this request's: leaving the `async with` cancels it and frees the tier."""
        return self.rt.executor.stream(OpenGeneration(tier, self.request))

    async def _collect(self, tier: str) -> list[Event]:
        async with self._open(tier) as generation:
            return [event async for event in generation]

    async def _stream_live(self, tier: str) -> list[Event]:
        """Stream as events arrive; the response starts with the first event, so earlier faults can escalate."""
        events: list[Event] = []
        async with self._open(tier) as generation:
            async for event in generation:
                if not self.sink.stream_opened:
                    self._settle(tier)
                    await self._open_stream()
                events.append(event)
                assert self.renderer is not None
                chunks = self.renderer.event(event)
                if chunks:
                    await self.sink.write(chunks)
        return events

    def _settle(self, tier: str) -> None:
        """Record which tier answers; tiers tried before it are what it escalated from."""
        self.meta.tier = tier
        self.meta.executor = self.rt.executor_kinds.get(tier, "cache" if tier == "L0" else "shortcut")
        tried = [a.tier for a in self.meta.attempts
                 if a.outcome in ("failed", "low_confidence") and a.tier != tier]
        self.meta.escalated_from = tried or None

    async def _open_stream(self) -> None:
        self.renderer = self.wire.stream_renderer(self.request)
        await self.sink.open_stream(self.meta.headers(self.controls.no_cache))
        await self.sink.write(self.renderer.start())

    async def _answer(self, key: str, tier: str, completion: Completion, events: list[Event],
                      verdict: Judgement, *, store: bool) -> None:
        meta = self.meta
        if not self.sink.stream_opened:
            self._settle(tier)
        meta.confidence = verdict.score
        meta.model = completion.model or None
        completion.native = self.wire.capture_native(events)
        if store and self.cache_on and completion.finish_reason in STORABLE_FINISH:
            entry = L0Entry(completion=completion, tier=tier, agent_turn=meta.agent_turn,
                            semantic_ok=not (meta.agent_turn or completion.tool_calls),
                            confidence=verdict.score, task_type=meta.task_type, rule_id=meta.rule_id,
                            ceiling=meta.ceiling)
            # Stored before the last bytes go out, so an identical request right after is a hit.
            if await self.cache.put(key, entry):
                await self._remember(key, completion, tier)
        await self._deliver(completion, events)

    async def _remember(self, key: str, completion: Completion, tier: str) -> None:
        """Shortcut tiers that index answers (L1) see the one just stored in L0 (they must not block)."""
        query = self._shortcut_query(key)
        for name in SHORTCUT_ORDER:
            shortcut = self.rt.shortcuts.get(name)
            if shortcut is None:
                continue
            try:
                await shortcut.remember(query, completion, tier)
            except Exception:  # the answer stands; a tier that fails to remember must not change that
                log.exception("shortcut tier %s failed to remember an answer", name)

    async def _serve_hit(self, entry: L0Entry) -> None:
        meta = self.meta
        meta.cache_hit, meta.cache = True, "hit"
        self._settle("L0")
        meta.model = entry.completion.model or None
        meta.confidence = entry.confidence
        # The classification made when the answer was stored: a hit does not classify again.
        meta.task_type, meta.rule_id, meta.ceiling = entry.task_type, entry.rule_id, entry.ceiling
        meta.agent_turn = entry.agent_turn  # the same key is the same request: no need to scan its prompt again
        await self._deliver(entry.completion, self.wire.replay(entry.completion, self.request.stream))

    async def _deliver(self, completion: Completion, events: list[Event]) -> None:
        self.meta.usage = completion.usage
        if not self.request.stream:
            self.meta.latency_ms = self._elapsed_ms()
            body = self.wire.render(completion, self.request, self.meta.to_json(), events)
            await self.sink.send_json(200, body, self.meta.headers(self.controls.no_cache))
            return
        if not self.sink.stream_opened:
            await self._open_stream()
            assert self.renderer is not None
            chunks = [c for event in events for c in self.renderer.event(event)]
            await self.sink.write(chunks)
        assert self.renderer is not None
        self.meta.latency_ms = self._elapsed_ms()
        await self.sink.write(self.renderer.finish(self.meta.to_json()))
        await self.sink.close_stream()

    async def _fail(self, err: DaariError) -> None:
        self.meta.latency_ms = self._elapsed_ms()
        if self.meta.error is None:
            self.meta.error = err.code or type(err).__name__
        if self.sink.stream_opened and self.renderer is not None:
            await self.sink.write(self.renderer.error(err, self.meta.to_json()))
            await self.sink.close_stream()
            return
        status, body = self.wire.render_error(err)
        body["daari_meta"] = self.meta.to_json()
        headers = self.meta.headers(self.controls.no_cache)
        if err.retry_after is not None:
            headers["retry-after"] = str(int(err.retry_after + 0.999))
        await self.sink.send_json(status, body, headers)

    def _elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)


def _assemble(events: list[Event], tier: str) -> Completion:
    try:
        return assemble(events)
    except ValueError:
        raise UpstreamError(f"tier {tier} ended its answer without finishing it (truncated stream)",
                            upstream=tier) from None
