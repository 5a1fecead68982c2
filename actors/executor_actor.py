"""ExecutorActor: owns every tier's executor (upstream connections, the embedded model) and runs generations.

Asked to `OpenGeneration`, it starts a supervised task in its own nursery and replies at once with a
`Generation`: the events' receive channel and the task's cancel scope. The asker consumes the events inside
`async with generation:`; leaving that block, for any reason (a client disconnect included), cancels the
task, which closes the upstream connection. Per-tier concurrency is a CapacityLimiter each.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType

import trio

from actors.actor import Actor
from daari.errors import DaariError, NotFound, Overloaded, UpstreamError
from daari.executors.base import Executor
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event

log = logging.getLogger("daari.executor")


@dataclass(frozen=True)
class GenerationFailed:
    """The last item on a generation's channel when it failed; `error` is raised in the consumer."""

    error: DaariError


@dataclass(frozen=True)
class OpenGeneration:
    tier: str
    request: ChatRequest


@dataclass(frozen=True)
class TierStatus:
    pass


@dataclass(frozen=True)
class CountTokens:
    """Ask a tier's upstream to count a request's tokens; replies with a `PendingCount`."""

    tier: str
    request: ChatRequest


@dataclass(frozen=True)
class PendingCount:
    """A count running in the actor's nursery: one item arrives on `result` (the upstream's JSON answer, or
    the error). The asker cancels `scope` when it leaves, so a client gone also ends the upstream call."""

    result: trio.MemoryReceiveChannel[bytes | DaariError]
    scope: trio.CancelScope

    async def receive(self) -> bytes:
        try:
            with self.result:
                item = await self.result.receive()
        finally:
            self.scope.cancel()
        if isinstance(item, DaariError):
            raise item
        return item


@dataclass(frozen=True)
class ListModels:
    """Replies with a receive channel that yields the sorted model ids once they are gathered."""


class Generation:
    """A running generation, owned by the request task that asked for it."""

    def __init__(self, events: trio.MemoryReceiveChannel[Event | GenerationFailed],
                 scope: trio.CancelScope) -> None:
        self.events = events
        self.scope = scope

    async def __aenter__(self) -> Generation:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        # No await here: this runs while the request's scope may be cancelled.
        self.scope.cancel()
        self.events.close()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        async for item in self.events:
            if isinstance(item, GenerationFailed):
                raise item.error
            yield item


class ExecutorActor(Actor):
    name = "executor"

    def __init__(self, executors: dict[str, Executor], stream_buffer: int = 64) -> None:
        self.executors = executors
        self.limiters = {tier: trio.CapacityLimiter(ex.config.concurrency()) for tier, ex in executors.items()}
        self.in_flight = dict.fromkeys(executors, 0)  # running plus queued, per tier
        self.stream_buffer = stream_buffer
        self._nursery: trio.Nursery | None = None

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for executor in self.executors.values():
                await executor.start(nursery)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    for executor in self.executors.values():
                        await executor.aclose()

    async def handle(self, request: object) -> object:
        if isinstance(request, OpenGeneration):
            return self._open(request)
        if isinstance(request, TierStatus):
            return {tier: {"kind": ex.kind, **ex.status()} for tier, ex in self.executors.items()}
        if isinstance(request, CountTokens):
            return self._count(request)
        if isinstance(request, ListModels):
            # Listing may ask upstreams over the network: done in a task, never in the mailbox loop.
            send, receive = trio.open_memory_channel[list[str]](1)
            assert self._nursery is not None
            self._nursery.start_soon(self._list_models, send)
            return receive
        raise TypeError(f"ExecutorActor cannot handle {type(request).__name__}")

    async def _list_models(self, reply: trio.MemorySendChannel[list[str]]) -> None:
        names: set[str] = set()
        with reply:
            with trio.move_on_after(2):  # an upstream that does not answer must not stall the listing
                for executor in self.executors.values():
                    names.update(await executor.list_models())
            with contextlib.suppress(trio.BrokenResourceError):
                reply.send_nowait(sorted(names))

    def _count(self, request: CountTokens) -> PendingCount:
        executor = self.executors.get(request.tier)
        if executor is None:
            raise NotFound(f"tier {request.tier} is not configured")
        send, receive = trio.open_memory_channel[bytes | DaariError](1)
        scope = trio.CancelScope()
        assert self._nursery is not None
        self._nursery.start_soon(self._run_count, executor, request.request, send, scope)
        return PendingCount(receive, scope)

    async def _run_count(self, executor: Executor, request: ChatRequest,
                         send: trio.MemorySendChannel[bytes | DaariError], scope: trio.CancelScope) -> None:
        with scope, send:
            item: bytes | DaariError
            try:
                item = await executor.count_tokens(request)
            except DaariError as exc:
                item = exc
            except Exception as exc:
                log.exception("count_tokens on %s failed", executor.name)
                item = UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name)
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                send.send_nowait(item)

    def _open(self, request: OpenGeneration) -> Generation:
        executor = self.executors.get(request.tier)
        if executor is None:
            raise NotFound(f"tier {request.tier} is not configured")
        config = executor.config
        if self.in_flight[request.tier] >= config.concurrency() + config.max_queue:
            # Shed rather than queue without bound: a client retrying later beats one waiting forever.
            raise Overloaded(f"tier {request.tier} is busy: {config.concurrency()} running and "
                             f"{config.max_queue} queued (tiers.{request.tier}.max_queue); retry shortly")
        self.in_flight[request.tier] += 1
        send, receive = trio.open_memory_channel[Event | GenerationFailed](self.stream_buffer)
        scope = trio.CancelScope()
        assert self._nursery is not None
        self._nursery.start_soon(self._generate, executor, request.request, send, scope)
        return Generation(receive, scope)

    async def _generate(self, executor: Executor, request: ChatRequest,
                        send: trio.MemorySendChannel[Event | GenerationFailed],
                        scope: trio.CancelScope) -> None:
        with scope, send:
            try:
                await self._run_one(executor, request, send)
            finally:
                self.in_flight[executor.tier] -= 1

    async def _run_one(self, executor: Executor, request: ChatRequest,
                       send: trio.MemorySendChannel[Event | GenerationFailed]) -> None:
        try:
            async with self.limiters[executor.tier]:
                await executor.generate(request, send.send)
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return  # the consumer left: nothing to report to
        except DaariError as exc:
            failure: DaariError = exc
        except Exception as exc:
            log.exception("executor %s failed", executor.name)
            failure = UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name)
        try:
            send.send_nowait(GenerationFailed(failure))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            with trio.move_on_after(1), contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await send.send(GenerationFailed(failure))
