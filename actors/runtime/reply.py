"""Asker-owned replies: the asker creates them and waits; the actor writes into them, or finds the asker gone.

A `Reply` carries one answer, an `Outbox` a stream of items. Each has a cancel scope that the asker cancels
when it leaves, so work done on its behalf stops at once, and a `wanted` flag, so queued work it no longer
wants is never started. Every reply ends answered, failed or abandoned: no asker waits forever.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

import outcome
import trio

T = TypeVar("T")
R = TypeVar("R")


class Reply(Generic[R]):
    """One answer. `detached` replies (from `tell`) have no asker: they stay wanted until answered."""

    def __init__(self, *, detached: bool = False) -> None:
        self.scope = trio.CancelScope()
        self.detached = detached
        self._result: outcome.Outcome[R] | None = None
        self._done = trio.Event()
        self._abandoned = False
        self._on_settle: Callable[[Reply[R]], None] | None = None

    @property
    def wanted(self) -> bool:
        return not self._abandoned and not self._done.is_set()

    def send(self, value: R) -> bool:
        """Answer; False when the asker is gone or it was already answered (neither is an error)."""
        return self._settle(outcome.Value(value))

    def fail(self, error: BaseException) -> bool:
        return self._settle(outcome.Error(error))

    def _settle(self, result: outcome.Outcome[R]) -> bool:
        if not self.wanted:
            return False
        self._result = result
        self._done.set()
        if self._on_settle is not None:
            self._on_settle(self)
        return True

    def abandon(self) -> None:
        """The asker is gone: cancel work done for it; a later answer is dropped."""
        if not self._done.is_set():
            self._abandoned = True
            self.scope.cancel()
            if self._on_settle is not None:
                self._on_settle(self)

    async def wait(self) -> R:
        """The answer (or its error raised here); leaving early, cancelled, abandons the reply."""
        try:
            await self._done.wait()
        finally:
            if not self._done.is_set():
                self.abandon()
        assert self._result is not None
        return self._result.unwrap()


class Outbox(Generic[T]):
    """The actor's end of an asker-owned stream. `send` waits while the asker's buffer is full."""

    def __init__(self, channel: trio.MemorySendChannel[T], state: StreamState) -> None:
        self._channel = channel
        self._state = state
        self.scope = state.scope

    @property
    def wanted(self) -> bool:
        return not self._state.abandoned and not self._state.finished

    async def send(self, item: T) -> None:
        """Raises `trio.BrokenResourceError` when the asker has left (its scope is cancelled too)."""
        await self._channel.send(item)

    def send_nowait(self, item: T) -> bool:
        """Put `item` in the asker's buffer if it has room (True), without a checkpoint; False when full.
        Raises `trio.BrokenResourceError` when the asker has left."""
        try:
            self._channel.send_nowait(item)
        except trio.WouldBlock:
            return False
        return True

    def finish(self) -> None:
        self._state.finished = True
        self._channel.close()

    def fail(self, error: BaseException) -> None:
        if not self._state.finished:
            self._state.error = error
        self.finish()

    def close(self) -> None:
        """End the actor's side; unless `finish` or `fail` came first, the asker hears the actor stopped."""
        self._channel.close()


class StreamState:
    """What the two ends of a stream share besides the items: the asker's scope and how the stream ended."""

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.abandoned = False
        self.finished = False
        self.error: BaseException | None = None


class StreamReader(Generic[T]):
    """The asker's end: iterate it inside the `async with` that opened it; leaving cancels the work."""

    def __init__(self, channel: trio.MemoryReceiveChannel[T], state: StreamState,
                 stopped: Callable[[], BaseException]) -> None:
        self._channel = channel
        self._state = state
        self._stopped = stopped

    # The reader is its own iterator, not an async generator: one per generation of every request, and an async
    # generator costs Trio's hooks (registered on its first step, finalized when dropped) besides its frames.
    def __aiter__(self) -> StreamReader[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self._channel.receive()
        except trio.EndOfChannel:
            error = self._state.error
            if error is not None:
                # Raised here, not where it happened: keep the actor's cause (the upstream's own exception) and
                # drop only this EndOfChannel from the chain.
                raise error from error.__cause__
            if not self._state.finished:
                raise self._stopped() from None  # the actor went away mid-stream: never a silent end
            raise StopAsyncIteration from None

    async def batches(self) -> AsyncIterator[list[T]]:
        """The items in runs: each waits for one item, then takes every item already queued behind it without
        waiting, so a consumer can do once per run what it would do per item (one socket write for a burst)."""
        async for first in self:
            batch = [first]
            while True:
                try:
                    batch.append(self._channel.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break  # the end (and how the stream ended) is for the next wait to report
            yield batch

    async def receive(self) -> T:
        """The next item; `trio.EndOfChannel` after the last one."""
        async for item in self:
            return item
        raise trio.EndOfChannel

    def abandon(self) -> None:
        state = self._state
        if not state.finished:
            state.abandoned = True
            # A finished stream's work has nothing left to await in its scope (`finish` is its last step): a
            # cancel there would only cost a recompute of the scope's status, on every request.
            state.scope.cancel()
        self._channel.close()


def open_stream(buffer: int, stopped: Callable[[], BaseException]) -> tuple[Outbox[T], StreamReader[T]]:
    send, receive = trio.open_memory_channel[T](buffer if buffer >= 0 else math.inf)
    state = StreamState()
    return Outbox(send, state), StreamReader(receive, state, stopped)
