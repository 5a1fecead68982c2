"""ExecutorActor: owns every tier's executor (upstream connections, the embedded model) and lends request tasks
slots to run generations on them, in the request's own task.

A generation is `await generations.run(tier, request, emit)` (`Generations`, the actor's door, which outlives its
restarts as an address does): no mailbox round trip, no task, no channel; the events go straight from the executor
to the asker's `emit`. The actor keeps everything stateful: the executors (started and closed in its lifespan, so
their connection pools live and die with it), a CapacityLimiter per tier, the running and waiting counts,
shedding, background preemption and shutdown. Running under the asker's cancel scope, a generation ends the moment
its asker leaves (a client disconnect included), which frees the tier's slot and closes the upstream connection;
one whose asker left while it was queued never starts. Past `max_concurrency + max_queue` a tier sheds with
503 / 529. One generation failing never touches another. The actor stopping cancels every lease it lent (the
asker hears `ActorDown`) and waits for them to unwind before it closes the executors.

A `background` generation (a shadow sample, actors/shadow.py) is the lowest priority on its tier: it starts
only when the tier has a free slot and no client waits for one, it is not counted against the tier's queue, and
it is cancelled (`Preempted`) the moment a client has to queue for that tier, so it never holds a slot a client
is waiting for.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import trio

from actors import runtime
from actors.faults import FAULTS
from actors.runtime import Actor, Call, handles
from daari.errors import DaariError, NotFound, Overloaded, UpstreamError
from daari.executors.base import DownstreamFailed, Executor, Lease, RelayEmit, Revoked
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Emit

log = logging.getLogger("daari.executor")

# How long a stopping actor waits for the generations it cancelled to unwind before it closes their executors'
# connections anyway (an executor that shields its cleanup for longer is a bug; the close must still happen).
DRAIN_S = 5.0


class Preempted(DaariError):
    """A background generation gave its slot to a client (or the tier never had an idle one for it)."""


class Generations:
    """Where request tasks run generations: the running ExecutorActor's slots, reached without its mailbox.

    Made before the actor (compose.py's `Shared`) and handed to whoever generates; each run of the actor attaches
    itself once its executors started and detaches as it stops. Asked between two runs (a restart), `run` waits
    for the next one, as a message waits in the mailbox; asked once the supervisor stopped or gave up (`close`),
    it raises the runtime's `ActorDown` in daari's shape (503 / Anthropic 529), as a closed address does."""

    def __init__(self, name: str = "executor") -> None:
        self.name = name
        self.actor: ExecutorActor | None = None
        self._up = trio.Event()
        self._down: str | None = None

    def attach(self, actor: ExecutorActor) -> None:
        self.actor = actor
        self._up.set()

    def detach(self, actor: ExecutorActor) -> None:
        if self.actor is actor:
            self.actor, self._up = None, trio.Event()

    def close(self, reason: str) -> None:
        """No more runs (`ActorSpec.on_down`): waiting and later askers hear the actor is down, and why."""
        self._down = reason
        self.actor = None
        self._up.set()

    def run(self, tier: str, request: ChatRequest, emit: Emit, *,
            background: bool = False) -> Coroutine[Any, Any, None]:
        """Generate `request` at `tier` in this task, each event to `emit` (`await generations.run(...)`). An emit
        with `flush` (the request's live relay, a `RelayEmit`) writes to the client as the executor reads; an
        executor's failure is an `UpstreamError` (its `DaariError` as it is); leaving (cancelled) frees the slot at
        once. Not a coroutine of its own while the actor is up (the actor's is awaited directly): every coroutine
        frame between the request's task and the upstream socket is resumed at each wait on it (each read of a
        relayed stream)."""
        actor = self.actor
        if actor is not None:
            return actor.generate(tier, request, emit, background=background)
        return self._run_when_up(tier, request, emit, background)

    async def _run_when_up(self, tier: str, request: ChatRequest, emit: Emit, background: bool) -> None:
        """`run` while the actor is (re)starting: wait for it, or hear that it is down."""
        actor = self.actor
        while actor is None:
            if self._down is not None:
                raise FAULTS.translate(runtime.ActorDown(self.name, f"the {self.name} actor is down ({self._down})"))
            await self._up.wait()
            actor = self.actor
        await actor.generate(tier, request, emit, background=background)


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

    def __init__(self, executors: dict[str, Executor], door: Generations | None = None) -> None:
        self.executors = executors
        self.door = door
        self.limiters = {tier: trio.CapacityLimiter(ex.config.concurrency()) for tier, ex in executors.items()}
        self.in_flight = dict.fromkeys(executors, 0)  # running plus queued, per tier (clients only)
        self.waiting = dict.fromkeys(executors, 0)  # client generations waiting for a slot, per tier
        self.background: dict[str, set[Lease]] = {tier: set() for tier in executors}
        self.slot_freed = {tier: trio.Event() for tier in executors}
        self.freed_waiters = dict.fromkeys(executors, 0)  # background generations waiting on `slot_freed`, per tier
        self.leases: set[Lease] = set()  # every generation lent a slot or waiting for one
        self.stopping = False
        self._drained = trio.Event()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            for executor in self.executors.values():
                await executor.start(nursery)
            if self.door is not None:
                self.door.attach(self)
            try:
                yield
            finally:
                if self.door is not None:
                    self.door.detach(self)
                with trio.CancelScope(shield=True):
                    await self._end_leases()
                nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    for executor in self.executors.values():
                        await executor.aclose()

    async def _end_leases(self) -> None:
        """Cancel every generation this run lent a slot (or that waits for one) and let them unwind, so none is
        left using a connection pool that is about to close."""
        self.stopping = True
        for lease in self.leases:
            lease.revoke()
        if self.leases:
            with trio.move_on_after(DRAIN_S):
                await self._drained.wait()

    async def generate(self, tier: str, request: ChatRequest, emit: Emit, *, background: bool = False) -> None:
        """Run a generation in the caller's task under a lease: shed, queue for a slot, run, free the slot.
        Called through `Generations.run`."""
        executor = self.executors.get(tier)
        if executor is None:
            raise NotFound(f"tier {tier} is not configured")
        if self.stopping:
            raise self._stopped()
        # The lease is not a cancel scope of its own: its waits and the executor's scope are its (`Lease`).
        lease = Lease()
        self.leases.add(lease)
        try:
            if background:
                await self._background(tier, executor, request, emit, lease)
            else:
                # A client's generation, in this frame (not a method's: every coroutine frame between the request's
                # task and the upstream socket is resumed at each wait on it, each read of a relayed stream).
                config = executor.config
                if self.in_flight[tier] >= config.concurrency() + config.max_queue:
                    # Shed rather than queue without bound: a client retrying later beats one waiting forever.
                    raise Overloaded(f"tier {tier} is busy: {config.concurrency()} running and "
                                     f"{config.max_queue} queued (tiers.{tier}.max_queue); retry shortly")
                self.in_flight[tier] += 1
                try:
                    await self._slot(tier, lease)
                    try:
                        await _run(executor, request, emit, lease)
                    finally:
                        self._release(tier, lease)
                finally:
                    self.in_flight[tier] -= 1
        except Revoked:
            if self.stopping:
                raise self._stopped() from None
            raise Preempted(f"tier {tier}: a client queued for the slot this background generation held",
                            code="preempted") from None
        finally:
            self.leases.discard(lease)
            if self.stopping and not self.leases:
                self._drained.set()

    def _stopped(self) -> BaseException:
        return FAULTS.translate(runtime.ActorDown(self.name, f"the {self.name} actor stopped before finishing "
                                                             f"its answer"))

    async def _slot(self, tier: str, lease: Lease) -> None:
        """A client's slot: at once when one is free, else queued, and background work there is cancelled. The
        lease is the borrower (not the task: a task may hold slots of two generations, a side question's too)."""
        limiter = self.limiters[tier]
        try:
            limiter.acquire_on_behalf_of_nowait(lease)
            return
        except trio.WouldBlock:
            pass
        self.waiting[tier] += 1
        try:
            for other in self.background[tier]:
                other.revoke()  # its slot comes back when its generation has unwound
            with lease.scoped():
                await limiter.acquire_on_behalf_of(lease)
        finally:
            self.waiting[tier] -= 1

    def _release(self, tier: str, lease: Lease) -> None:
        self.limiters[tier].release_on_behalf_of(lease)
        if self.freed_waiters[tier]:  # a new Event per generation only where a background one waits for a slot
            freed, self.slot_freed[tier] = self.slot_freed[tier], trio.Event()
            freed.set()

    async def _background(self, tier: str, executor: Executor, request: ChatRequest, emit: Emit,
                          lease: Lease) -> None:
        """Wait (under the asker's scope, which bounds the wait) for an idle slot nobody waits for; give it
        back to the first client that queues (revoking the lease: `generate` raises `Preempted`)."""
        limiter = self.limiters[tier]
        if self.waiting[tier] or limiter.available_tokens == 0:
            with lease.scoped():
                while self.waiting[tier] or limiter.available_tokens == 0:
                    self.freed_waiters[tier] += 1
                    try:
                        await self.slot_freed[tier].wait()
                    finally:
                        self.freed_waiters[tier] -= 1
        limiter.acquire_on_behalf_of_nowait(lease)  # no await since the check: the slot is still free
        self.background[tier].add(lease)
        try:
            await _run(executor, request, emit, lease)
        finally:
            self.background[tier].discard(lease)
            self._release(tier, lease)

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


def _run(executor: Executor, request: ChatRequest, emit: Emit, lease: Lease) -> Coroutine[Any, Any, None]:
    """The generation's coroutine, awaited by the caller: a dispatcher, not a frame resumed at every wait."""
    if getattr(emit, "flush", None) is not None:  # a `RelayEmit`: told by its attribute, as resilience.py does
        return _relayed(executor, request, cast(RelayEmit, emit), lease)
    return _generated(executor, request, emit, lease)


async def _generated(executor: Executor, request: ChatRequest, emit: Emit, lease: Lease) -> None:
    try:
        await executor.generate_leased(request, emit, lease)
    except DaariError:
        raise
    except Exception as exc:
        log.exception("executor %s failed", executor.name)
        raise UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name) from exc


async def _relayed(executor: Executor, request: ChatRequest, relay: RelayEmit, lease: Lease) -> None:
    """The generation writes to the client through the request's relay: an executor that marks its reads
    (`flushes_per_read`) gets the relay itself, so a read's events go out in one write; any other gets the relay's
    call, which writes each event as it comes (nothing in between to batch them, and no event waits for a later
    one). What the relay kept when the executor ended (its last events, or those before a failure) is written
    before the end or the error is reported. A failed write comes as `DownstreamFailed` (the relay's: a
    `DaariError`, passed on as the asker's answer, not logged as this executor's failure)."""
    try:
        await executor.generate_leased(request, relay if executor.flushes_per_read else relay.__call__, lease)
    except DownstreamFailed:
        raise
    except DaariError:
        with lease.scoped():
            await relay.flush()
        raise
    except Exception as exc:
        log.exception("executor %s failed", executor.name)
        with lease.scoped():
            await relay.flush()
        raise UpstreamError(f"{executor.name} failed: {type(exc).__name__}", upstream=executor.name) from exc
    with lease.scoped():  # the relay's last write, still under the lease
        await relay.flush()


def _status(executor: Executor) -> dict[str, Any]:
    """A tier's status() that raises is reported, never a crash: /healthz must not cancel anyone's stream."""
    try:
        return executor.status()
    except Exception as exc:
        log.exception("status of %s failed", executor.name)
        return {"error": f"status failed: {type(exc).__name__}"}
