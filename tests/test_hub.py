"""The fan-out hub: every subscriber gets its own bounded channel; a slow one is dropped, never waited for.
Attached handlers run inside `publish`."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors.hub import Hub, follow


async def test_every_subscriber_receives_every_item_in_order() -> None:
    hub: Hub[int] = Hub()
    with hub.subscribe("a") as a, hub.subscribe("b") as b:
        for i in range(5):
            hub.publish(i)
        assert [await a.receive() for _ in range(5)] == list(range(5))
        assert [await b.receive() for _ in range(5)] == list(range(5))


async def test_filter_keeps_only_wanted_items_and_they_do_not_fill_the_buffer() -> None:
    hub: Hub[int] = Hub()
    with hub.subscribe("evens", buffer=2, accept=lambda n: n % 2 == 0) as evens:
        for i in range(4):
            hub.publish(i)  # 1 and 3 never take room: two slots hold 0 and 2
        assert not evens.lagged
        assert [await evens.receive(), await evens.receive()] == [0, 2]


async def test_a_lagging_subscriber_is_dropped_and_counted_without_slowing_the_publisher() -> None:
    drops: list[str] = []
    hub: Hub[int] = Hub(on_drop=drops.append)
    slow = hub.subscribe("slow", buffer=2)
    fast = hub.subscribe("fast", buffer=100)
    for i in range(10):
        hub.publish(i)  # synchronous: returns at once even though "slow" never reads
    assert slow.lagged and drops == ["slow"] and hub.dropped["slow"] == 1
    assert hub.subscribers == ["fast"]
    # The dropped subscription still yields what it held, then ends.
    assert [item async for item in slow] == [0, 1]
    assert [await fast.receive() for _ in range(10)] == list(range(10))


async def test_a_filter_that_raises_drops_only_its_subscriber() -> None:
    hub: Hub[int] = Hub()
    bad = hub.subscribe("bad", accept=lambda n: 1 // n > 0)
    good = hub.subscribe("good")
    hub.publish(0)
    assert bad.failed and hub.dropped["bad"] == 1
    assert await good.receive() == 0


async def test_closed_subscription_is_not_counted_as_a_drop() -> None:
    hub: Hub[int] = Hub()
    sub = hub.subscribe("tail", buffer=1)
    sub.close()
    hub.publish(1)
    hub.publish(2)
    assert hub.subscribers == [] and not hub.dropped


async def test_close_ends_subscribers_after_they_drain() -> None:
    hub: Hub[str] = Hub()
    sub = hub.subscribe("x")
    hub.publish("last")
    hub.close()
    assert [item async for item in sub] == ["last"]
    late = hub.subscribe("late")
    assert [item async for item in late] == []


async def test_follow_resubscribes_after_lagging_and_ends_when_the_hub_closes() -> None:
    hub: Hub[int] = Hub()
    seen: list[int] = []
    release = trio.Event()

    async def handle(item: int) -> None:
        seen.append(item)
        await release.wait()  # stuck on the first item: the subscription overflows

    async with trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: follow(hub, "stuck", handle, buffer=2, task_status=task_status))
        hub.publish(0)
        await trio.testing.wait_all_tasks_blocked()  # the handler holds item 0
        for i in range(1, 5):
            hub.publish(i)  # 1, 2 fit; 3 overflows: dropped
        assert hub.dropped["stuck"] == 1 and hub.subscribers == []
        release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert hub.subscribers == ["stuck"]  # subscribed again
        hub.publish(9)
        await trio.testing.wait_all_tasks_blocked()
        hub.close()
    assert seen == [0, 1, 2, 9]


def test_attached_handlers_run_inside_publish_and_one_that_raises_stays_attached(
        caplog: pytest.LogCaptureFixture) -> None:
    hub: Hub[int] = Hub()
    seen: list[int] = []

    def picky(item: int) -> None:
        if item == 1:
            raise RuntimeError("bad item")
        seen.append(item)

    attached = hub.attach("picky", picky)
    with hub.attach("counter", lambda item: seen.append(-item)):
        for i in range(3):
            assert hub.publish(i) == 2
        assert seen == [0, 0, -1, 2, -2]  # synchronous: done when publish returns, the bad item skipped
        assert hub.subscribers == ["picky", "counter"]
    assert "hub subscriber picky failed on an item" in caplog.text and not hub.dropped
    assert hub.subscribers == ["picky"]  # the `with` detached "counter"
    attached.detach()
    hub.publish(5)
    assert seen == [0, 0, -1, 2, -2]


def test_closing_the_hub_detaches_its_handlers_and_tells_them() -> None:
    hub: Hub[int] = Hub()
    seen: list[int] = []
    closed: list[str] = []
    hub.attach("a", seen.append, on_close=lambda: closed.append("a"))
    hub.close()
    hub.attach("late", seen.append, on_close=lambda: closed.append("late"))
    hub.publish(1)
    assert seen == [] and hub.subscribers == [] and closed == ["a", "late"]


def test_a_handler_that_sheds_load_is_counted_as_dropped() -> None:
    drops: list[str] = []
    hub: Hub[int] = Hub(on_drop=drops.append)
    hub.attach("queue", lambda item: None)
    hub.count_drop("queue")
    assert drops == ["queue"] and hub.dropped["queue"] == 1 and hub.subscribers == ["queue"]
