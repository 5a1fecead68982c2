"""ExecutorActor: owns every tier's executor (upstream connections, the embedded model) and runs generations.

A generation is a stream the request task owns: `async with rt.executor.stream(OpenGeneration(tier, req))`.
It runs as a task under the asker's cancel scope: leaving the block (a client disconnect included) cancels
it at once, which frees the tier's slot and closes the upstream connection; a generation whose asker left
while it was queued never starts. Per-tier concurrency is a CapacityLimiter each; past `max_concurrency +
max_queue` a tier sheds with 503 / 529. One generation failing never touches another.

A `background` generation (a shadow sample, actors/shadow.py) is the lowest priority on its tier: it starts
only when the tier has a free slot and no client waits for one, it is not counted against the tier's queue, and
it is cancelled (`Preempted`) the moment a client has to queue for that tier, so it never holds a slot a client
is waiting for.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from actors.runtime import Actor, Call, Outbox, Stream, handles, streams
from daari.errors import DaariError, NotFound, Overloaded, UpstreamError
from daari.executors.base import DownstreamFailed, Executor, RelayEmit
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event

log = logging.getLogger("daari.executor")


@dataclass(frozen=True)
class OpenGeneration(Stream[Event]):
    tier: str
    request: ChatRequest
    background: bool = False  # lowest priority: waits for an idle slot, yields it to any client (above)
    # The request's live relay: where the tier's executor marks its reads (`flushes_per_read`), the generation
    # emits into it, rendering and writing to the client from this task, and the stream carries no events;
    # otherwise the events come through the stream as usual and the asker feeds them to the relay itself.
    relay: RelayEmit | None = field(default=None, compare=False)


class Preempted(DaariError):
    """A background generation gave its slot to a client (or the tier never had an idle one for it)."""


@dataclass(frozen=True)
class TierStatus(Call[dict[str, dict[str, Any]]]):
    """Each tier's state for /healthz and /metrics; a tier whose status() fails reports the error."""


@dataclass(frozen=True)
class CountTokens(Call[bytes]):
    """Ask a tier's upstream to count a request's tokens; the reply is its JSON answer. Runs under the
    asker's scope, so a client gone also ends the upstream call."""

    tier: str
    request: ChatRequest


@dataclass(frozen=True)
class ForwardResponses(Call[tuple[int, bytes]]):
    """POST a Responses client's body to another path of a Responses tier's upstream (/responses/compact,
    /responses/input_tokens); the reply is the upstream's status and body. Under the asker's scope."""

    tier: str
    path: str
    request: ChatRequest


@dataclass(frozen=True)
class ListModels(Call[list[str]]):
    """The sorted model ids every tier serves (may ask upstreams: Ollama's /api/tags)."""


class ExecutorActor(Actor):
    name = "executor"

    def __init__(self, executors: dict[str, Executor]) -> None:
        self.executors = executors
        self.limiters = {tier: trio.CapacityLimiter(ex.config.concurrency()) for tier, ex in executors.items()}
        self.in_flight = dict.fromkeys(executors, 0)  # running plus queued, per tier (clients only)
        self.waiting = dict.fromkeys(executors, 0)  # client generations waiting for a slot, per tier
        self.background: dict[str, set[trio.CancelScope]] = {tier: set() for tier in executors}
        self.slot_freed = {tier: trio.Event() for tier in executors}

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            for executor in self.executors.values():
                await executor.start(nursery)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    for executor in self.executors.values():
                        await executor.aclose()

    @streams(OpenGeneration)
    async def generate(self, request: OpenGeneration, out: Outbox[Event]) -> None:
        executor = self.executors.get(request.tier)
        if executor is None:
            raise NotFound(f"tier {request.tier} is not configured")
        if request.background:
            await self._background(request, executor, out)
            return
        config = executor.config
        if self.in_flight[request.tier] >= config.concurrency() + config.max_queue:
            # Shed rather than queue without bound: a client retrying later beats one waiting forever.
            raise Overloaded(f"tier {request.tier} is busy: {config.concurrency()} running and "
                             f"{config.max_queue} queued (tiers.{request.tier}.max_queue); retry shortly")
        self.in_flight[request.tier] += 1
        try:
            await self._slot(request.tier)
            try:
                await _run(executor, request, out)
            finally:
                self._release(request.tier)
        finally:
            self.in_flight[request.tier] -= 1

    async def _slot(self, tier: str) -> None:
        """A client's slot: at once when one is free, else queued, and background work there is cancelled."""
        limiter = self.limiters[tier]
        try:
            limiter.acquire_nowait()
            return
        except trio.WouldBlock:
            pass
        self.waiting[tier] += 1
        try:
            for scope in self.background[tier]:
                scope.cancel()  # its slot comes back when its generation has unwound
            await limiter.acquire()
        finally:
            self.waiting[tier] -= 1

    def _release(self, tier: str) -> None:
        self.limiters[tier].release()
        freed, self.slot_freed[tier] = self.slot_freed[tier], trio.Event()
        freed.set()

    async def _background(self, request: OpenGeneration, executor: Executor, out: Outbox[Event]) -> None:
        """Wait (under the asker's scope, which bounds the wait) for an idle slot nobody waits for; give it
        back to the first client that queues."""
        tier = request.tier
        limiter = self.limiters[tier]
        while self.waiting[tier] or limiter.available_tokens == 0:
            await self.slot_freed[tier].wait()
        limiter.acquire_nowait()  # no await since the check: the slot is still free
        try:
            with trio.CancelScope() as scope:
                self.background[tier].add(scope)
                try:
                    await _run(executor, request, out)
                finally:
                    self.background[tier].discard(scope)
        finally:
            self._release(tier)
        if scope.cancelled_caught:
            raise Preempted(f"tier {tier}: a client queued for the slot this background generation held",
                            code="preempted")

    @handles(TierStatus)
    async def status(self, request: TierStatus) -> dict[str, dict[str, Any]]:
        return {tier: {"kind": ex.kind, **_status(ex)} for tier, ex in self.executors.items()}

    @handles(CountTokens, concurrent=True)
    async def count_tokens(self, request: CountTokens) -> bytes:
        executor = self.executors.get(request.tier)
        if executor is None:
            raise NotFound(f"tier {request.tier} is not configured")
        try:
            return await executor.count_tokens(request.request)
        except DaariError:
            raise
        except Exception as exc:
            log.exception("count_tokens on %s failed", executor.name)
            raise UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name) from exc

    @handles(ForwardResponses, concurrent=True)
    async def forward(self, request: ForwardResponses) -> tuple[int, bytes]:
        executor = self.executors.get(request.tier)
        if executor is None:
            raise NotFound(f"tier {request.tier} is not configured")
        try:
            return await executor.forward(request.path, request.request)
        except DaariError:
            raise
        except Exception as exc:
            log.exception("forwarding %s to %s failed", request.path, executor.name)
            raise UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name) from exc

    @handles(ListModels, concurrent=True)
    async def list_models(self, request: ListModels) -> list[str]:
        names: set[str] = set()
        with trio.move_on_after(2):  # an upstream that does not answer must not stall the listing
            for executor in self.executors.values():
                names.update(await executor.list_models())
        return sorted(names)


class _StreamEmit:
    """The executor's `emit` into the asker's stream (a `NowaitEmit`): an event the stream has room for goes in
    without a checkpoint, so an upstream event costs the executor's task no extra pass of Trio's run loop. An
    executor emitting in a tight loop still yields at the latest once the buffer is full (`Address.stream`'s
    buffer, 64), when its emit has to wait for the asker."""

    __slots__ = ("_out",)

    def __init__(self, out: Outbox[Event]) -> None:
        self._out = out

    async def __call__(self, event: Event) -> None:
        await self._out.send(event)

    def nowait(self, event: Event) -> bool:
        return self._out.send_nowait(event)


async def _run(executor: Executor, request: OpenGeneration, out: Outbox[Event]) -> None:
    relay = request.relay if executor.flushes_per_read else None
    if relay is not None:
        await _relayed(executor, request.request, relay)
        return
    try:
        await executor.generate(request.request, _StreamEmit(out))
    except (DaariError, trio.BrokenResourceError, trio.ClosedResourceError):
        raise
    except Exception as exc:
        log.exception("executor %s failed", executor.name)
        raise UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name) from exc


async def _relayed(executor: Executor, request: ChatRequest, relay: RelayEmit) -> None:
    """The generation writes to the client through the request's relay, in this task: an upstream event reaches
    the client's socket without waking the request's task. What the relay kept when the executor ended (its last
    events, or those before a failure) is written before the end or the error is reported, as a stream's queued
    events are delivered before its error. A failed write comes as `DownstreamFailed` (the relay's: a
    `DaariError`, so it is passed on as the asker's answer, not logged as this executor's failure)."""
    try:
        await executor.generate(request, relay)
    except DownstreamFailed:
        raise
    except (DaariError, trio.BrokenResourceError, trio.ClosedResourceError):
        await relay.flush()
        raise
    except Exception as exc:
        log.exception("executor %s failed", executor.name)
        await relay.flush()
        raise UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name) from exc
    await relay.flush()


def _status(executor: Executor) -> dict[str, Any]:
    """A tier's status() that raises is reported, never a crash: /healthz must not cancel anyone's stream."""
    try:
        return executor.status()
    except Exception as exc:
        log.exception("status of %s failed", executor.name)
        return {"error": f"status failed: {type(exc).__name__}"}
