"""The executor interface: push a request's answer as neutral events, raise `DaariError` on failure.

Push-style (`emit`) rather than async generators: a Trio nursery or cancel scope cannot be held across a
`yield`, and an upstream stream must live inside the request's cancel scope so that a client disconnect
closes the upstream connection.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

import trio

from daari.config import TierConfig
from daari.errors import DaariError, UpstreamUnavailable
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Emit, Event

# Emit is defined with the events; executors import it from here
__all__ = ["Collect", "DownstreamFailed", "Emit", "Executor", "Lease", "NowaitEmit", "RelayEmit", "Revoked",
           "read_done"]


@runtime_checkable
class NowaitEmit(Protocol):
    """An `Emit` that can also deliver without waiting: `nowait(event)` is True when the event was delivered
    at once (no checkpoint), False when delivering it would wait (then await the emit itself)."""

    async def __call__(self, event: Event) -> None: ...

    def nowait(self, event: Event) -> bool: ...


@runtime_checkable
class RelayEmit(NowaitEmit, Protocol):
    """An emit that writes to the client itself (the request's live relay, run in the executor's task, so an
    event reaches the client without a hand-off to the request's task): `nowait` renders an event and keeps it,
    `flush` writes what was kept. An executor with `flushes_per_read` calls `read_done` after each upstream read's
    events, so a burst goes out in one write and no event waits for a later read. One may also have `prepare()`,
    which the resilience wrapper calls once the upstream's response head is in (the live relay builds its first
    write's opening then, ahead of the first event)."""

    async def flush(self) -> None: ...


class Collect:
    """A `NowaitEmit` that keeps a generation's events in `events` (through `feed`, a filter that may rewrite
    them, when given): for an answer read whole (buffered tiers, side questions, shadow calls). Never waits: the
    executor's own reads are its checkpoints."""

    __slots__ = ("events", "feed")

    def __init__(self, events: list[Event], feed: Callable[[Event], list[Event]] | None = None) -> None:
        self.events = events
        self.feed = feed

    def nowait(self, event: Event) -> bool:
        if self.feed is None:
            self.events.append(event)
        else:
            self.events.extend(self.feed(event))
        return True

    async def __call__(self, event: Event) -> None:
        self.nowait(event)


class DownstreamFailed(DaariError):
    """A relay's write to the client failed (its `__cause__`): the client's side, never the upstream's. Carried
    out of the executor's task as this so it is not mistaken for an executor failure; the relay's owner raises
    the cause again."""


async def read_done(emit: Emit) -> None:
    """One upstream read's events were emitted: an emit that keeps events (a `RelayEmit`) writes them now."""
    flush = getattr(emit, "flush", None)
    if flush is not None:
        await flush()


class Revoked(BaseException):
    """A generation's lease was revoked (the ExecutorActor stopping, or a client queuing for a background
    generation's slot) and the lease's scope caught the cancellation. The actor turns it into the asker's answer.
    A BaseException, as the `Cancelled` it stands for: no executor's nor wrapper's `except Exception` takes it for
    a failure of its own."""


class Lease:
    """A generation's hold on a tier's slot, lent by the ExecutorActor: the slot's borrower, and how the actor
    ends the generation (`revoke`: it stops, or a client needs a background generation's slot).

    A revoke cancels the one cancel scope the lease holds at that moment: a scope of its own around a wait
    (`scoped`), or a scope the executor enters anyway and hands it (`hold`: the resilience wrapper's attempt
    scope, with its deadlines), so a generation pays for one scope, not the actor's around the wrapper's
    (entering and leaving a Trio cancel scope is ~48 k instructions; docs/performance.md, "The upstream
    generation on a pass-through"). A scope held after a revoke is cancelled at once. Whoever holds the scope
    raises `Revoked` when it caught the revoke's cancellation; a revoke after the generation's last wait changes
    nothing, as a cancel after a scope's last checkpoint does."""

    __slots__ = ("scope", "revoked")

    def __init__(self) -> None:
        self.scope: trio.CancelScope | None = None
        self.revoked = False

    def revoke(self) -> None:
        self.revoked = True
        if self.scope is not None:
            self.scope.cancel()

    def hold(self, scope: trio.CancelScope) -> None:
        """`scope`, about to be entered, is where a revoke lands until `drop`."""
        self.scope = scope
        if self.revoked:
            scope.cancel()

    def drop(self, scope: trio.CancelScope) -> None:
        if self.scope is scope:
            self.scope = None

    def scoped(self) -> _LeaseScope:
        """`with lease.scoped(): await ...`: the wait under the lease; `Revoked` when a revoke ended it."""
        return _LeaseScope(self)


class _LeaseScope:
    __slots__ = ("_lease", "_scope")

    def __init__(self, lease: Lease) -> None:
        self._lease = lease
        self._scope = trio.CancelScope()

    def __enter__(self) -> None:
        self._lease.hold(self._scope)
        self._scope.__enter__()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        self._lease.drop(self._scope)
        handled = self._scope.__exit__(kind, exc, tb)
        if self._scope.cancelled_caught:
            raise Revoked from None
        return handled


class Executor(ABC):
    kind: str = "base"
    # Whether this executor can answer a request that defines tools with tool calls.
    supports_tools: bool = False
    # Whether `generate` calls `read_done(emit)` after each upstream read's events: only then may the executor
    # actor hand it the request's relay as its emit (events written from the executor's task, in runs).
    flushes_per_read: bool = False

    def __init__(self, tier: str, config: TierConfig) -> None:
        self.tier = tier
        self.config = config

    @property
    def name(self) -> str:
        """Upstream name for logs and errors: never holds a key."""
        return f"{self.tier}:{self.kind}"

    async def start(self, nursery: trio.Nursery) -> None:  # noqa: B027 - an optional hook, no-op by default
        """Open connections or begin loading a model in `nursery` (the ExecutorActor's). Returns promptly.

        Called again after an ExecutorActor restart, following `aclose`: must be re-entrant.
        """

    async def aclose(self) -> None:  # noqa: B027 - an optional hook, no-op by default
        """Release what `start` opened."""

    @abstractmethod
    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        """Answer `request` by awaiting `emit` for each event, ending with `Finish`.

        Raise a `DaariError` (UpstreamError, UpstreamTimeout, ...) on failure. Retries are allowed only
        before the first `emit`; after it, a failure must propagate.
        """

    async def generate_leased(self, request: ChatRequest, emit: Emit, lease: Lease) -> None:
        """`generate` on a slot the ExecutorActor lent: under a scope of the lease's (`Revoked` when the lease was
        revoked). The resilience wrapper hands the lease its attempt scope instead."""
        with lease.scoped():
            await self.generate(request, emit)

    async def count_tokens(self, request: ChatRequest) -> bytes:
        """The upstream's own answer to an Anthropic count_tokens request (JSON bytes), where it has one.
        Executors without one raise `UpstreamUnavailable`; the caller then answers with daari's estimate."""
        raise UpstreamUnavailable(f"{self.name} has no count_tokens endpoint", upstream=self.name)

    async def forward(self, path: str, request: ChatRequest) -> tuple[int, bytes]:
        """A Responses client's body POSTed to `path` of the upstream as sent (its status and JSON answer),
        for endpoints beside /responses (/responses/compact, /responses/input_tokens). Only a Responses
        upstream has them; other executors raise `UpstreamUnavailable`."""
        raise UpstreamUnavailable(f"{self.name} has no {path} endpoint", upstream=self.name)

    def status(self) -> dict[str, Any]:
        """State for /healthz and metrics (model loaded, circuit breaker state...)."""
        return {}

    def context_window(self) -> int | None:
        """The model's context window in tokens: the tier's `context_window`, else what the upstream said (Ollama's
        /api/show), else None (unknown: requests are not held to one)."""
        return self.config.context_window

    def listed_models(self) -> frozenset[str] | None:
        """The model names the upstream said it serves when last asked (Ollama's /api/tags, an OpenAI-compatible
        /v1/models); None when it was not asked or could not say. No I/O."""
        return None

    def model_names(self) -> list[str]:
        """Model ids this executor is configured for (no I/O)."""
        return [self.config.model] if self.config.model else []

    async def list_models(self) -> list[str]:
        """Model ids for GET /v1/models; an upstream may ask its server (Ollama's /api/tags)."""
        return self.model_names()
