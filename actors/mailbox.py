"""Bounded mailboxes and ask/reply: a message carries its own reply channel.

Replies never go through mailboxes, so actors never wait on each other in a circle. Errors travel back
as `outcome.Error` values and are raised in the asker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import outcome
import trio

from daari.errors import Overloaded

Request = TypeVar("Request")


@dataclass
class Envelope(Generic[Request]):
    request: Request
    reply: trio.MemorySendChannel[outcome.Outcome[Any]] | None  # None for tell()

    def answer(self, result: outcome.Outcome[Any]) -> bool:
        """Deliver the reply; False when the asker is gone (cancelled), which is not an error."""
        if self.reply is None:
            return False
        try:
            self.reply.send_nowait(result)
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
            return False
        finally:
            self.reply.close()


class Address(Generic[Request]):
    """Where to send an actor messages. Survives restarts: the supervisor owns the mailbox."""

    def __init__(self, name: str, send: trio.MemorySendChannel[Envelope[Request]]) -> None:
        self.name = name
        self._send = send

    async def ask(self, request: Request) -> Any:
        """Send and wait for the reply; waits for room in a full mailbox (backpressure)."""
        return await self._ask(request, shed=False)

    async def ask_or_shed(self, request: Request) -> Any:
        """Like `ask`, but a full mailbox answers at once with `Overloaded` (a clear 503) instead of waiting."""
        return await self._ask(request, shed=True)

    async def _ask(self, request: Request, *, shed: bool) -> Any:
        reply_send, reply_recv = trio.open_memory_channel[outcome.Outcome[Any]](1)
        envelope = Envelope(request, reply_send)
        with reply_recv:
            try:
                if shed:
                    self._send.send_nowait(envelope)
                else:
                    await self._send.send(envelope)
            except trio.WouldBlock:
                raise Overloaded(f"the {self.name} actor is overloaded; retry shortly") from None
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise Overloaded(f"the {self.name} actor is down; GET /healthz shows why") from None
            try:
                result = await reply_recv.receive()
            except trio.EndOfChannel:
                raise Overloaded(f"the {self.name} actor stopped before answering; retry, or see GET /healthz") \
                    from None
        return result.unwrap()

    def tell(self, request: Request) -> bool:
        """Fire and forget; False (dropped) when the mailbox is full or closed. Never blocks."""
        try:
            self._send.send_nowait(Envelope(request, None))
            return True
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return False

    def close(self) -> None:
        self._send.close()


def open_mailbox(
    name: str, size: int
) -> tuple[Address[Any], trio.MemoryReceiveChannel[Envelope[Any]]]:
    send, recv = trio.open_memory_channel[Envelope[Any]](size)
    return Address(name, send), recv
