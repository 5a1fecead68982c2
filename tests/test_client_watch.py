"""The client watch (daari/server/client_watch.py) on Trio's mock clock: a request that ends within a tick is never
watched by a task; one that runs on is, and its client's leaving cancels it; a watch never cancels a request that
is over; the arming task does not tick while nothing runs."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from daari.server.client_watch import ARMING_TASK, WATCH_TASK, ClientWatches
from tests.support import tasks_named

DISCONNECT = {"type": "http.disconnect"}
BODY_END = {"type": "http.request", "body": b"", "more_body": False}  # left on the queue by the body reader


def _queue() -> tuple[trio.MemorySendChannel[dict[str, Any]], Any]:
    send, receive = trio.open_memory_channel[dict[str, Any]](10)
    send.send_nowait(BODY_END)
    return send, receive.receive


async def test_a_request_answered_within_a_tick_starts_no_watch_task(autojump_clock: Any) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)  # noqa: F841 (the fixture-free form below sets it)
    watches = ClientWatches(tick_s=1.0)
    async with trio.open_nursery() as nursery:
        watches.start(nursery)
        for _ in range(3):
            send, receive = _queue()
            async with watches(receive)():
                await trio.sleep(0.1)  # the request's own waits, shorter than a tick
            send.send_nowait(DISCONNECT)  # the server reports the finished stream
            assert watches.waiting == 0
        await trio.sleep(5.0)
        assert tasks_named(WATCH_TASK) == 0
        nursery.cancel_scope.cancel()


async def test_a_long_request_is_armed_and_its_client_leaving_cancels_it(autojump_clock: Any) -> None:
    watches = ClientWatches(tick_s=1.0)
    cancelled = False
    async with trio.open_nursery() as nursery:
        watches.start(nursery)
        send, receive = _queue()

        async def request() -> None:
            nonlocal cancelled
            async with watches(receive)():
                await trio.sleep(1000.0)  # an upstream that never answers
            cancelled = True  # reached only when the watch's scope caught its cancel

        nursery.start_soon(request)
        await trio.sleep(2.5)  # armed after one to two ticks
        assert tasks_named(WATCH_TASK) == 1
        assert not cancelled
        started = trio.current_time()
        send.send_nowait(DISCONNECT)  # the client hangs up
        await trio.testing.wait_all_tasks_blocked()
        assert cancelled
        assert trio.current_time() == started  # noticed at once by the armed watch
        assert tasks_named(WATCH_TASK) == 0
        nursery.cancel_scope.cancel()


async def test_a_client_leaving_before_the_arming_is_noticed_when_armed(autojump_clock: Any) -> None:
    watches = ClientWatches(tick_s=1.0)
    ended_at: list[float] = []
    async with trio.open_nursery() as nursery:
        watches.start(nursery)
        send, receive = _queue()
        send.send_nowait(DISCONNECT)  # gone right away: the disconnect waits on the request's queue

        async def request() -> None:
            async with watches(receive)():
                await trio.sleep(1000.0)
            ended_at.append(trio.current_time())

        began = trio.current_time()
        nursery.start_soon(request)
        await trio.sleep(10.0)
        assert ended_at and 1.0 <= ended_at[0] - began <= 2.0  # within two ticks, not after the upstream's 1000 s
        nursery.cancel_scope.cancel()


async def test_a_watch_armed_on_a_request_that_then_ends_cancels_nothing(autojump_clock: Any) -> None:
    watches = ClientWatches(tick_s=1.0)
    async with trio.open_nursery() as nursery:
        watches.start(nursery)
        send, receive = _queue()
        watched = watches(receive)()
        async with watched:
            await trio.sleep(2.5)  # armed: the watch task waits on the queue
            assert tasks_named(WATCH_TASK) == 1
        send.send_nowait(DISCONNECT)  # the finished stream's report reaches the watch after the request left
        await trio.testing.wait_all_tasks_blocked()
        assert tasks_named(WATCH_TASK) == 0
        assert watched.scope is not None and not watched.scope.cancel_called
        nursery.cancel_scope.cancel()


async def test_the_arming_task_waits_without_ticking_while_nothing_runs(autojump_clock: Any) -> None:
    watches = ClientWatches(tick_s=1.0)
    async with trio.open_nursery() as nursery:
        watches.start(nursery)
        await trio.sleep(0.5)
        ticks = 0
        sleep = trio.sleep

        async def counted(seconds: float) -> None:
            nonlocal ticks
            ticks += 1
            await sleep(seconds)

        trio.sleep = counted  # type: ignore[assignment]
        try:
            await sleep(100.0)  # idle: the arming task waits on its event
            assert ticks == 0
            send, receive = _queue()
            async with watches(receive)():
                await sleep(0.1)
            await sleep(100.0)  # one tick to let the request's generation go, then waiting again
            assert 1 <= ticks <= 2
        finally:
            trio.sleep = sleep  # type: ignore[assignment]
        assert tasks_named(ARMING_TASK) == 1
        nursery.cancel_scope.cancel()
