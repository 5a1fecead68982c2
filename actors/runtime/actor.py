"""What an actor is: a resource it owns (`lifespan`) and one handler per message type.

Handlers are declared with decorators, so each message type has its own typed method:

- `@handles(Get)`: `async def get(self, msg: Get) -> R`, serially, one message at a time; the return value
  is the reply. Once started it runs to its end (keep it short); a message whose asker left is skipped.
- `@handles(Get, concurrent=True)`: the same, but each message runs as its own task under the asker's
  cancel scope (slow I/O that must not hold up the mailbox, cancelled when the asker leaves).
- `@batches(Embed, max_items=32, max_wait_s=0.005)`: `async def embed(self, calls: list[Pending[Embed, R]])`
  gets up to `max_items` queued messages of that type at once, waiting up to `max_wait_s` for more, and
  answers each `Pending` whenever it likes (deferred replies). Unanswered ones fail when the run ends.
- `@streams(Open)`: `async def open(self, msg: Open, out: Outbox[T])` runs as a task under the asker's
  scope and writes items into the asker's stream; leaving the stream cancels it at once.

A `Faults.expected` exception from a handler is the answer and the actor goes on. Any other exception from
a serial handler is answered as `ActorCrashed` and crashes the actor (its supervisor restarts a fresh one);
from a concurrent or stream handler it is answered to that asker only and the actor goes on, so one failed
piece of work never cancels the others.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

import trio

from actors.runtime.faults import ActorCrashed, ActorDown, Faults
from actors.runtime.mailbox import Envelope
from actors.runtime.messages import Call, Stream
from actors.runtime.reply import Outbox, Reply

log = logging.getLogger("actors")

A = TypeVar("A", bound="Actor")
M = TypeVar("M")
R = TypeVar("R")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

Kind = Literal["serial", "concurrent", "batch", "stream"]


@dataclass(frozen=True)
class Pending(Generic[M, R]):
    """A message taken by a batch handler, with the reply it owes its asker."""

    message: M
    reply: Reply[R]

    @property
    def wanted(self) -> bool:
        return self.reply.wanted

    def answer(self, value: R) -> bool:
        return self.reply.send(value)

    def fail(self, error: BaseException) -> bool:
        return self.reply.fail(error)


Limit = Callable[[Any], float]  # read from the actor instance, for limits that come from its config


@dataclass(frozen=True)
class HandlerSpec:
    message_type: type[Any]
    kind: Kind
    max_items: int | Limit = 1
    max_wait_s: float | Limit = 0.0

    def limits(self, actor: Actor) -> tuple[int, float]:
        items = self.max_items(actor) if callable(self.max_items) else self.max_items
        wait = self.max_wait_s(actor) if callable(self.max_wait_s) else self.max_wait_s
        return max(1, int(items)), max(0.0, float(wait))


def _mark(spec: HandlerSpec) -> Callable[[F], F]:
    def mark(fn: F) -> F:
        fn.__actor_handler__ = spec  # type: ignore[attr-defined]
        return fn
    return mark


def handles(message_type: type[Call[R]], *, concurrent: bool = False
            ) -> Callable[[Callable[[A, Any], Awaitable[R]]], Callable[[A, Any], Awaitable[R]]]:
    """Declare the handler of `message_type`; mypy checks that it returns the reply type the message names."""
    return _mark(HandlerSpec(message_type, "concurrent" if concurrent else "serial"))


def batches(message_type: type[Call[R]], *, max_items: int | Limit = 1, max_wait_s: float | Limit = 0.0
            ) -> Callable[[Callable[[A, list[Pending[Any, R]]], Awaitable[None]]],
                          Callable[[A, list[Pending[Any, R]]], Awaitable[None]]]:
    """Either limit may be a function of the actor (`max_items=lambda actor: actor.batch_size`)."""
    return _mark(HandlerSpec(message_type, "batch", max_items, max_wait_s))


def streams(message_type: type[Stream[T]]
            ) -> Callable[[Callable[[A, Any, Outbox[T]], Awaitable[None]]],
                          Callable[[A, Any, Outbox[T]], Awaitable[None]]]:
    return _mark(HandlerSpec(message_type, "stream"))


class Actor:
    name: ClassVar[str] = "actor"
    _handlers: ClassVar[dict[type[Any], tuple[HandlerSpec, str]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table = dict(cls._handlers)
        for attr, value in vars(cls).items():
            spec = getattr(value, "__actor_handler__", None)
            if isinstance(spec, HandlerSpec):
                table[spec.message_type] = (spec, attr)
        cls._handlers = table

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Acquire the actor's resource; the default owns nothing. Override as an asynccontextmanager."""
        return _nothing()

    def _handler(self, message: object) -> tuple[HandlerSpec, Callable[..., Awaitable[Any]]]:
        for kind in type(message).__mro__:
            found = self._handlers.get(kind)
            if found is not None:
                spec, attr = found
                return spec, getattr(self, attr)
        raise TypeError(f"{self.name} has no handler for {type(message).__name__}")

    async def serve_inbox(self, inbox: trio.MemoryReceiveChannel[Envelope], faults: Faults = Faults(), *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """One run: closes `inbox` (this run's clone) however it ends, a failing lifespan included."""
        owed: set[Reply[Any]] = set()
        loop: _Loop | None = None
        with inbox:
            try:
                async with self.lifespan(), trio.open_nursery() as work:
                    task_status.started()
                    loop = _Loop(self, inbox, faults, work, owed)
                    await loop.run()
            finally:
                # What this run took and did not answer: replies of cancelled tasks and deferred batch replies,
                # and a message a batch took out of the mailbox to end itself (the next run cannot see it).
                unanswered: list[Reply[Any] | Outbox[Any]] = list(owed)
                if loop is not None and loop.lookahead is not None:
                    unanswered.append(loop.lookahead.reply)
                for reply in unanswered:
                    reply.fail(faults.translate(ActorDown(self.name, f"the {self.name} actor stopped "
                                                                     f"before answering")))


class _Loop:
    """The mailbox loop of one run: dispatches each envelope to its handler by message type."""

    def __init__(self, actor: Actor, inbox: trio.MemoryReceiveChannel[Envelope], faults: Faults,
                 work: trio.Nursery, owed: set[Reply[Any]]) -> None:
        self.actor = actor
        self.inbox = inbox
        self.faults = faults
        self.work = work
        self.owed = owed
        self.lookahead: Envelope | None = None

    async def run(self) -> None:
        while True:
            if self.lookahead is not None:
                envelope, self.lookahead = self.lookahead, None
            else:
                try:
                    envelope = await self.inbox.receive()
                except trio.EndOfChannel:
                    return
            if not envelope.wanted:
                continue  # the asker left while the message waited: never start its work
            try:
                spec, handler = self.actor._handler(envelope.message)
            except TypeError as exc:
                envelope.fail(self._crashed(exc))
                raise  # a message nobody handles is a bug: restart rather than guess
            if spec.kind == "serial":
                await self._serial(handler, envelope)
            elif spec.kind == "batch":
                await self._batch(spec, handler, envelope)
            elif spec.kind == "concurrent":
                self.work.start_soon(self._concurrent, handler, envelope)
            else:
                self.work.start_soon(self._stream, handler, envelope)

    def _crashed(self, exc: BaseException) -> BaseException:
        return self.faults.translate(ActorCrashed(self.actor.name,
                                                  f"the {self.actor.name} actor failed: {type(exc).__name__}"))

    async def _serial(self, handler: Callable[..., Awaitable[Any]], envelope: Envelope) -> None:
        assert isinstance(envelope.reply, Reply)
        try:
            value = await handler(envelope.message)
        except self.faults.expected as exc:
            envelope.reply.fail(exc)
        except Exception as exc:
            envelope.reply.fail(self._crashed(exc))
            raise
        else:
            envelope.reply.send(value)

    async def _concurrent(self, handler: Callable[..., Awaitable[Any]], envelope: Envelope) -> None:
        reply = envelope.reply
        assert isinstance(reply, Reply)
        # Owed until answered or abandoned: a task cancelled because the run ended (a crash elsewhere) leaves
        # its reply here, for `serve_inbox` to fail once the run is over.
        reply._on_settle = self._settled
        self.owed.add(reply)
        try:
            with reply.scope:
                value = await handler(envelope.message)
                reply.send(value)
        except self.faults.expected as exc:
            reply.fail(exc)
        except Exception as exc:
            log.exception("%s: %s failed", self.actor.name, type(envelope.message).__name__)
            reply.fail(self._crashed(exc))

    async def _stream(self, handler: Callable[..., Awaitable[Any]], envelope: Envelope) -> None:
        out = envelope.reply
        assert isinstance(out, Outbox)
        try:
            with out.scope:
                await handler(envelope.message, out)
                out.finish()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the asker left: nobody to tell
        except self.faults.expected as exc:
            out.fail(exc)
        except Exception as exc:
            log.exception("%s: %s failed", self.actor.name, type(envelope.message).__name__)
            out.fail(self._crashed(exc))
        finally:
            out.close()  # not finished (the actor stopped): the asker hears ActorDown, never a silent end

    async def _batch(self, spec: HandlerSpec, handler: Callable[..., Awaitable[Any]], first: Envelope) -> None:
        envelopes = [first]
        max_items, max_wait_s = spec.limits(self.actor)
        if max_items > 1:
            await self._collect(max_items, max_wait_s, envelopes)
        calls = []
        for envelope in envelopes:
            if envelope.wanted and isinstance(envelope.reply, Reply):
                envelope.reply._on_settle = self._settled
                self.owed.add(envelope.reply)
                calls.append(Pending(envelope.message, envelope.reply))
        if not calls:
            return
        try:
            await handler(calls)
        except self.faults.expected as exc:
            for call in calls:
                call.fail(exc)
        except Exception as exc:
            for call in calls:
                call.fail(self._crashed(exc))
            raise

    def _settled(self, reply: Reply[Any]) -> None:
        self.owed.discard(reply)

    async def _collect(self, max_items: int, max_wait_s: float, envelopes: list[Envelope]) -> None:
        """More messages of the same type: those queued now, then those arriving within `max_wait_s`."""
        with trio.move_on_after(max_wait_s):
            while len(envelopes) < max_items:
                try:
                    envelope = self.inbox.receive_nowait() if max_wait_s == 0 else await self.inbox.receive()
                except (trio.WouldBlock, trio.EndOfChannel):
                    return
                if type(envelope.message) is not type(envelopes[0].message):
                    self.lookahead = envelope  # another kind of message ends the batch; it goes next
                    return
                envelopes.append(envelope)


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield
