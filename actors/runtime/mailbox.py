"""Bounded mailboxes and addresses: call (one typed reply), stream (typed items), tell (no reply).

Every message travels in an `Envelope` with the asker's reply or outbox; replies never go through
mailboxes, so actors never wait on each other in a circle. A full mailbox makes `call` wait
(backpressure) or, with `shed=True`, fail at once with `ActorBusy`; a closed one fails with `ActorDown`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar

import trio

from actors.runtime.faults import ActorBusy, ActorDown, ActorFault, Faults
from actors.runtime.messages import Call, Stream
from actors.runtime.reply import Outbox, Reply, StreamReader, open_stream

R = TypeVar("R")
T = TypeVar("T")


@dataclass(eq=False)
class Envelope:
    message: object
    reply: Reply[Any] | Outbox[Any]

    @property
    def wanted(self) -> bool:
        return self.reply.wanted

    def fail(self, error: BaseException) -> None:
        self.reply.fail(error)


class Address:
    """Where to send an actor messages. Survives restarts: the supervisor owns the mailbox."""

    def __init__(self, name: str, send: trio.MemorySendChannel[Envelope], faults: Faults,
                 stream_buffer: int = 64) -> None:
        self.name = name
        self.faults = faults
        self.stream_buffer = stream_buffer
        self._send = send
        self.down_reason: str | None = None

    async def call(self, message: Call[R], *, shed: bool = False) -> R:
        """Send `message` and wait for its reply. Cancelled while queued, the actor never starts it."""
        reply: Reply[R] = Reply()
        await self._post(Envelope(message, reply), shed=shed)
        return await reply.wait()

    async def call_or_shed(self, message: Call[R]) -> R:
        return await self.call(message, shed=True)

    def tell(self, message: Call[Any]) -> bool:
        """Fire and forget; False (dropped) when the mailbox is full or closed. Never blocks."""
        try:
            self._send.send_nowait(Envelope(message, Reply(detached=True)))
            return True
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return False

    def stream(self, message: Stream[T], *, shed: bool = False, buffer: int | None = None) -> OpenedStream[T]:
        """`async with address.stream(msg) as items: async for item in items: ...`

        Leaving the block for any reason cancels the work at once (or it is never started).
        """
        outbox: Outbox[T]
        reader: StreamReader[T]
        outbox, reader = open_stream(self.stream_buffer if buffer is None else buffer,
                                     lambda: self.fault(ActorDown, "stopped before finishing its answer"))
        return OpenedStream(self, Envelope(message, outbox), reader, shed)

    async def _post(self, envelope: Envelope, *, shed: bool) -> None:
        try:
            if shed:
                self._send.send_nowait(envelope)
            else:
                await self._send.send(envelope)
        except trio.WouldBlock:
            raise self.fault(ActorBusy, "is overloaded; retry shortly") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise self.fault(ActorDown, "is down") from None

    def fault(self, kind: type[ActorFault], what: str) -> BaseException:
        detail = f" ({self.down_reason})" if kind is ActorDown and self.down_reason else ""
        return self.faults.translate(kind(self.name, f"the {self.name} actor {what}{detail}"))

    def close(self, reason: str) -> None:
        """No more messages: later sends, and senders waiting for room, fail with `ActorDown`."""
        self.down_reason = reason
        self._send.close()


class OpenedStream(Generic[T]):
    """`Address.stream`'s context: the message posted on entry, the stream abandoned on leaving. A plain class
    rather than an `asynccontextmanager`: every generation of every request opens one."""

    __slots__ = ("_address", "_envelope", "_reader", "_shed")

    def __init__(self, address: Address, envelope: Envelope, reader: StreamReader[T], shed: bool) -> None:
        self._address = address
        self._envelope = envelope
        self._reader = reader
        self._shed = shed

    async def __aenter__(self) -> StreamReader[T]:
        try:
            await self._address._post(self._envelope, shed=self._shed)
        except BaseException:
            self._reader.abandon()
            raise
        return self._reader

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._reader.abandon()


class Mailbox:
    """Both ends of an actor's mailbox; the supervisor holds it and hands each run a clone of `inbox`."""

    def __init__(self, name: str, size: int, faults: Faults = Faults(), stream_buffer: int = 64) -> None:
        send, self.inbox = trio.open_memory_channel[Envelope](size)
        self.address = Address(name, send, faults, stream_buffer)
        self.capacity = size

    @property
    def depth(self) -> int:
        """Messages queued now (trio's channel statistics; the clones of each run share the one buffer)."""
        return self.inbox.statistics().current_buffer_used

    def close_and_fail_queued(self, reason: str) -> int:
        """Close the address and fail every queued message with `ActorDown`; returns how many were queued."""
        self.address.close(reason)
        failed = 0
        while True:
            try:
                envelope = self.inbox.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return failed
            envelope.fail(self.address.fault(ActorDown, "is down"))
            failed += 1
