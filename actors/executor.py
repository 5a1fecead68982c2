"""ExecutorActor: owns every tier's executor (upstream connections, the embedded model) and runs generations.

A generation is a stream the request task owns: `async with rt.executor.stream(OpenGeneration(tier, req))`.
It runs as a task under the asker's cancel scope: leaving the block (a client disconnect included) cancels
it at once, which frees the tier's slot and closes the upstream connection; a generation whose asker left
while it was queued never starts. Per-tier concurrency is a CapacityLimiter each; past `max_concurrency +
max_queue` a tier sheds with 503 / 529. One generation failing never touches another.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from actors.runtime import Actor, Call, Outbox, Stream, handles, streams
from daari.errors import DaariError, NotFound, Overloaded, UpstreamError
from daari.executors.base import Executor
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event

log = logging.getLogger("daari.executor")


@dataclass(frozen=True)
class OpenGeneration(Stream[Event]):
    tier: str
    request: ChatRequest


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
        self.in_flight = dict.fromkeys(executors, 0)  # running plus queued, per tier

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
        config = executor.config
        if self.in_flight[request.tier] >= config.concurrency() + config.max_queue:
            # Shed rather than queue without bound: a client retrying later beats one waiting forever.
            raise Overloaded(f"tier {request.tier} is busy: {config.concurrency()} running and "
                             f"{config.max_queue} queued (tiers.{request.tier}.max_queue); retry shortly")
        self.in_flight[request.tier] += 1
        try:
            async with self.limiters[request.tier]:
                await executor.generate(request.request, out.send)
        except (DaariError, trio.BrokenResourceError, trio.ClosedResourceError):
            raise
        except Exception as exc:
            log.exception("executor %s failed", executor.name)
            raise UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name) from exc
        finally:
            self.in_flight[request.tier] -= 1

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


def _status(executor: Executor) -> dict[str, Any]:
    """A tier's status() that raises is reported, never a crash: /healthz must not cancel anyone's stream."""
    try:
        return executor.status()
    except Exception as exc:
        log.exception("status of %s failed", executor.name)
        return {"error": f"status failed: {type(exc).__name__}"}
