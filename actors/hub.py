"""A fan-out hub: each published item goes to every subscriber's own bounded channel, never waiting, and
to every attached synchronous handler.

A subscriber that falls behind (its channel is full) is dropped and counted: publishing never blocks and
never slows the publisher. A dropped subscription ends (its iteration stops) with `lagged` set, so a live
tail can tell its client and subscribe again. Handlers (`attach`) are for microsecond bookkeeping (counters,
a log line): called inside `publish`, with no queue and no task wake-up per item. Imports nothing from daari.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar

import trio

from actors.runtime import Actor, Call, handles

T = TypeVar("T")

log = logging.getLogger("actors.hub")


class Subscription(Generic[T]):
    """One subscriber's end of a hub: iterate it (`async for item in sub`) until it ends.

    It ends when the subscriber closes it, when the hub drops it for lagging (`lagged` is then True) or
    when its filter raised (`failed`), or when the hub closes.
    """

    def __init__(self, hub: Hub[T], name: str, buffer: int, accept: Callable[[T], bool] | None) -> None:
        self.hub = hub
        self.name = name
        self.accept = accept
        self.lagged = False
        self.failed = False
        self._send, self._receive = trio.open_memory_channel[T](buffer)

    async def receive(self) -> T:
        """The next item; raises `trio.EndOfChannel` once the subscription has ended and is drained."""
        try:
            return await self._receive.receive()
        except trio.ClosedResourceError:
            raise trio.EndOfChannel from None

    def receive_nowait(self) -> T:
        """The next queued item without waiting (batching readers); `trio.WouldBlock` when none is queued."""
        try:
            return self._receive.receive_nowait()
        except trio.ClosedResourceError:
            raise trio.EndOfChannel from None

    def __aiter__(self) -> AsyncIterator[T]:
        return self._items()

    async def _items(self) -> AsyncIterator[T]:
        while True:
            try:
                item = await self.receive()
            except trio.EndOfChannel:
                return
            yield item

    def close(self) -> None:
        """Unsubscribe; items already queued are discarded."""
        self.hub._remove(self)
        self._send.close()
        self._receive.close()

    def __enter__(self) -> Subscription[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _offer(self, item: T) -> bool:
        """Hub only: queue `item` if the filter wants it; False when this subscriber must be dropped."""
        try:
            if self.accept is not None and not self.accept(item):
                return True
        except Exception:
            log.exception("hub subscriber %s: filter failed; dropping it", self.name)
            self.failed = True
            return False
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            self.lagged = True
            return False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # closed by its subscriber
        return True

    def _end(self) -> None:
        """Hub only: no more items; what is queued can still be read."""
        self._send.close()


class Attachment(Generic[T]):
    """A handler attached to a hub (`Hub.attach`); `detach()` (or leaving its `with`) stops it."""

    def __init__(self, hub: Hub[T], name: str, handle: Callable[[T], None],
                 on_close: Callable[[], None] | None = None) -> None:
        self.hub = hub
        self.name = name
        self.handle = handle
        self.on_close = on_close

    def detach(self) -> None:
        self.hub._detach(self)

    def __enter__(self) -> Attachment[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.detach()


class Hub(Generic[T]):
    """Publish with `publish(item)` (synchronous, never blocks); subscribe with `subscribe(name, ...)`, or
    `attach(name, handle)` a synchronous handler.

    `on_drop(name)` is called for every subscriber dropped because it fell behind or its filter raised
    (a metrics counter, typically); `dropped` counts the same by subscriber name.
    """

    def __init__(self, *, default_buffer: int = 256, on_drop: Callable[[str], None] | None = None) -> None:
        self.default_buffer = default_buffer
        self.on_drop = on_drop
        self.published = 0
        self.dropped: Counter[str] = Counter()
        self._subscriptions: list[Subscription[T]] = []
        self._attached: tuple[Attachment[T], ...] = ()  # replaced, never mutated: publish iterates it as is
        self._closed = False

    def subscribe(self, name: str, *, buffer: int | None = None,
                  accept: Callable[[T], bool] | None = None) -> Subscription[T]:
        """A new subscription receiving every item published from now on (that `accept` takes, if given)."""
        subscription = Subscription(self, name, buffer or self.default_buffer, accept)
        if self._closed:
            subscription._end()
        else:
            self._subscriptions.append(subscription)
        return subscription

    def attach(self, name: str, handle: Callable[[T], None], *,
               on_close: Callable[[], None] | None = None) -> Attachment[T]:
        """Call `handle(item)` inside every `publish` from now on, until detached or the hub closes (then
        `on_close()` is called: no more items will come).

        For handlers that take microseconds and never block (counters, a log line): no channel, no task, no
        wake-up per item, which on a busy loop cost more than such a handler. Their time is the publisher's,
        so anything slower (I/O, awaiting) subscribes instead. A handler that raises is logged and the item
        skipped for it; it stays attached. A handler that queues items for a task of its own bounds the
        queue itself, and reports falling behind with `count_drop`.
        """
        attachment = Attachment(self, name, handle, on_close)
        if self._closed:
            if on_close is not None:
                on_close()
        else:
            self._attached = (*self._attached, attachment)
        return attachment

    def publish(self, item: T) -> int:
        """Offer `item` to every subscriber and handler; returns how many are still subscribed. Never awaits."""
        self.published += 1
        for attachment in self._attached:
            try:
                attachment.handle(item)
            except Exception:
                log.exception("hub subscriber %s failed on an item", attachment.name)
        lagging: list[Subscription[T]] | None = None
        for subscription in self._subscriptions:
            if not subscription._offer(item):
                if lagging is None:
                    lagging = []
                lagging.append(subscription)
        if lagging is not None:
            for subscription in lagging:
                self._drop(subscription)
        return len(self._attached) + len(self._subscriptions)

    @property
    def subscribers(self) -> list[str]:
        """The names of the attached handlers, then of the subscriptions."""
        return [a.name for a in self._attached] + [s.name for s in self._subscriptions]

    def close(self) -> None:
        """End every subscription (each drains what it holds), detach every handler and refuse new ones."""
        self._closed = True
        attached, self._attached = self._attached, ()
        subscriptions, self._subscriptions = self._subscriptions, []
        for subscription in subscriptions:
            subscription._end()
        for attachment in attached:
            if attachment.on_close is not None:
                attachment.on_close()

    def count_drop(self, name: str) -> None:
        """Count subscriber `name` as dropped for falling behind: the hub does so for a subscription whose
        channel is full; an attached handler that queues for a task of its own calls it when its queue is."""
        self.dropped[name] += 1
        log.warning("hub subscriber %s fell behind and was dropped", name)
        if self.on_drop is not None:
            self.on_drop(name)

    def _drop(self, subscription: Subscription[T]) -> None:
        if subscription not in self._subscriptions:
            return  # closed by its subscriber meanwhile: not a drop
        self._remove(subscription)
        subscription._end()
        if subscription.lagged or subscription.failed:
            self.count_drop(subscription.name)

    def _detach(self, attachment: Attachment[T]) -> None:
        self._attached = tuple(a for a in self._attached if a is not attachment)

    def _remove(self, subscription: Subscription[T]) -> None:
        try:
            self._subscriptions.remove(subscription)
        except ValueError:
            pass


async def follow(hub: Hub[T], name: str, handle: Callable[[T], Awaitable[None] | None], *,
                 buffer: int | None = None, accept: Callable[[T], bool] | None = None,
                 task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Run `handle` on every item until the hub closes; subscribe again after being dropped for lagging.

    For in-process subscribers that must outlive a burst and may await (a handler that never awaits and
    takes microseconds is cheaper attached: `Hub.attach`). Start it with `nursery.start(follow, ...)`: it is
    subscribed when `start` returns, so nothing published after is missed.
    An exception from `handle` is logged and the item skipped: one bad item does not end the subscriber.
    """
    started = False
    while True:
        with hub.subscribe(name, buffer=buffer, accept=accept) as subscription:
            if not started:
                task_status.started()
                started = True
            while True:
                try:
                    item = await subscription.receive()
                except trio.EndOfChannel:
                    break
                # Then whatever else is queued, without a checkpoint per item: under load one wake-up of
                # this task handles many items (a task step costs more than a cheap handler).
                while True:
                    await _handle(handle, item, name)
                    try:
                        item = subscription.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
            if not (subscription.lagged or subscription.failed):
                return  # the hub closed


async def _handle(handle: Callable[[T], Awaitable[None] | None], item: T, name: str) -> None:
    try:
        result = handle(item)
        if result is not None:
            await result
    except Exception:
        log.exception("hub subscriber %s failed on an item", name)


@dataclass(frozen=True)
class HubStats(Call["HubFigures"]):
    """What a hub has done: for /healthz and the tests."""


@dataclass(frozen=True)
class HubFigures:
    published: int
    subscribers: list[str]
    dropped: dict[str, int]


class HubActor(Actor):
    """A hub on the actor runtime: supervised like every actor and visible in /healthz; its table row closes the
    hub when the supervisor ends (`on_down=hub.close`), so subscribers end with the runtime. Publishing stays a
    synchronous call on the `Hub` itself: it never waits, where a mailbox round trip per published item would
    cost every request (an L0 hit included) ~16 us."""

    name = "hub"

    def __init__(self, hub: Hub[Any]) -> None:
        self.hub = hub

    @handles(HubStats)
    async def stats(self, request: HubStats) -> HubFigures:
        hub = self.hub
        return HubFigures(hub.published, hub.subscribers, dict(hub.dropped))
