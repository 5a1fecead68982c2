"""The CPU budget: request work goes before generation (the slot's order, and pauses between tokens).

Order of events only, never wall-clock: the generation is the real embedded model, the slot real threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import trio
import trio.testing

from daari.config import TierConfig
from daari.cpu_budget import REQUEST_WORK, Priority, PrioritySlot, RequestWork
from daari.executors.embedded import EmbeddedExecutor
from daari.executors.embedded_model import EMBEDDED
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import Event, TextDelta


async def until(condition: Callable[[], bool]) -> None:
    """Poll a condition a worker thread makes true (with the autojump clock this costs no real time)."""
    while not condition():
        await trio.sleep(0.001)


async def test_the_slot_goes_to_waiting_requests_before_an_earlier_generation_step(
        mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    slot = PrioritySlot()
    order: list[str] = []
    slot.acquire(Priority.GENERATION)  # a generation step is running

    async def waiter(name: str, priority: Priority) -> None:
        def work() -> None:
            with slot.held(priority):
                order.append(name)
        await trio.to_thread.run_sync(work)

    async with trio.open_nursery() as nursery:
        for count, (name, priority) in enumerate([("next token", Priority.GENERATION),
                                                  ("embedding", Priority.REQUEST),
                                                  ("second embedding", Priority.REQUEST)], start=1):
            nursery.start_soon(waiter, name, priority)
            await until(lambda count=count: slot.waiting() == count)  # type: ignore[misc]
        slot.release()
        slot.acquire(Priority.GENERATION)  # the releaser asks again at once: it queues behind the others
        order.append("releaser")
        slot.release()
    assert order == ["embedding", "second embedding", "next token", "releaser"]


def test_within_one_priority_the_slot_keeps_arrival_order() -> None:
    slot = PrioritySlot()
    order: list[str] = []
    slot.acquire(Priority.REQUEST)
    threads = []

    def step(name: str) -> None:
        with slot.held(Priority.GENERATION):
            order.append(name)

    for name in ("first", "second", "third"):
        thread = threading.Thread(target=step, args=(name,))
        thread.start()
        threads.append(thread)
        while slot.waiting() < len(threads):
            threading.Event().wait(0.001)
    slot.release()
    for thread in threads:
        thread.join()
    assert order == ["first", "second", "third"]


def test_request_work_is_counted_while_held_and_released_on_an_error() -> None:
    work = RequestWork()
    with work.hold():
        with work.hold():
            assert work.pending() == 2
        assert work.pending() == 1
    assert work.pending() == 0
    with pytest.raises(ValueError), work.hold():
        raise ValueError("a bad body")
    assert work.pending() == 0


async def test_a_pause_for_request_work_is_bounded_so_a_side_call_still_moves(
        mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    work = RequestWork(max_pause_s=0.01)
    with work.hold():  # request work that never ends while the generation waits
        waited = await trio.to_thread.run_sync(work.yield_to_requests)
    assert waited is True and work.pauses == 1
    assert await trio.to_thread.run_sync(work.yield_to_requests) is False  # nothing pending: no wait
    assert work.pauses == 1


@pytest.fixture(scope="module")
def executor() -> EmbeddedExecutor:
    EMBEDDED.load()
    return EmbeddedExecutor("L3", TierConfig(max_tokens=48))


async def test_a_generation_pauses_between_tokens_while_request_work_is_pending(
        executor: EmbeddedExecutor, mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    events: list[str] = []
    first_token = trio.Event()

    async def emit(event: Event) -> None:
        if isinstance(event, TextDelta):
            events.append("token")
            first_token.set()

    request = ChatRequest([Message("user", "Count from 1 to 100, separated by commas.")], "any")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(executor.generate, request, emit)
        await first_token.wait()
        with REQUEST_WORK.hold():
            events.append("request work starts")
            await until(lambda: REQUEST_WORK.paused_generations == 1)  # the generation waits for us
            for _ in range(20):  # time passes for the event loop: no token may arrive meanwhile
                await trio.sleep(0.01)
            events.append("request work ends")
    start, end = events.index("request work starts"), events.index("request work ends")
    assert events[start:end + 1].count("token") <= 1  # at most the token already being computed
    assert "token" in events[end:]  # and the generation went on afterwards
