"""A background (shadow) generation is the lowest priority on its tier: it starts only on an idle slot nobody
waits for, a client that has to queue cancels it at once, and it never counts against the tier's queue.

Through the ExecutorActor's door (generations in the asker's task) with a real loopback upstream
(tests/fakes/openai_upstream.py); the bounded wait is checked with Trio's MockClock against an executor that holds
its slot until told (time matters there only)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from actors.executor import ExecutorActor, Generations, Preempted
from actors.faults import FAULTS
from actors.runtime import Mailbox
from daari.config import TierConfig
from daari.errors import DaariError
from daari.executors.base import Collect, Emit, Executor
from daari.executors.registry import make_executor
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import Event, Finish, TextDelta, assemble
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app


def request(model: str, text: str = "tell me about trio") -> ChatRequest:
    return ChatRequest(messages=[Message("user", text)], model=model)


@asynccontextmanager
async def running(executors: dict[str, Executor]) -> AsyncIterator[tuple[Generations, ExecutorActor]]:
    mailbox = Mailbox("executor", 64, FAULTS)
    generations = Generations()
    actor = ExecutorActor(executors, generations)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.serve_inbox, mailbox.inbox, FAULTS)
        yield generations, actor
        nursery.cancel_scope.cancel()


async def collect(generations: Generations, tier: str, asked: ChatRequest, *, background: bool = False
                  ) -> list[Event]:
    events: list[Event] = []
    await generations.run(tier, asked, Collect(events), background=background)
    return events


async def until(condition: object, what: str) -> None:
    with trio.fail_after(20):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.01)


async def test_a_client_that_queues_cancels_the_background_generation_and_gets_its_slot() -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        # One slot and no queue: were the background generation counted, the client would be shed with 503.
        tier = TierConfig(executor="openai", base_url=upstream + "/v1", max_concurrency=1, max_queue=0)
        async with running({"L3": make_executor("L3", tier)}) as (executor, actor), trio.open_nursery() as nursery:
            outcome: list[BaseException] = []

            async def background() -> None:
                try:
                    await collect(executor, "L3", request("hang"), background=True)
                except DaariError as err:
                    outcome.append(err)

            nursery.start_soon(background)
            await until(lambda: fake.active_streams == 1, "the background call reached the upstream")
            answer = assemble(await collect(executor, "L3", request("good")))
            await until(lambda: outcome, "the background generation ended")
    assert isinstance(outcome[0], Preempted) and outcome[0].code == "preempted"
    assert "careful answer" in answer.text
    assert fake.closed_streams == 2 and fake.active_streams == 0  # the hanging upstream call was closed
    assert actor.in_flight["L3"] == 0 and actor.waiting["L3"] == 0 and not actor.background["L3"]


async def test_a_background_generation_waits_for_an_idle_slot_and_never_jumps_the_queue() -> None:
    fake = FakeOpenAI()
    fake.delay_s = 0.3
    async with serve_app(fake) as upstream:
        tier = TierConfig(executor="openai", base_url=upstream + "/v1", max_concurrency=1)
        async with running({"L3": make_executor("L3", tier)}) as (executor, _), trio.open_nursery() as nursery:
            order: list[str] = []

            async def ask(name: str, asked: ChatRequest, background: bool = False) -> None:
                await collect(executor, "L3", asked, background=background)
                order.append(name)

            nursery.start_soon(ask, "client-1", request("good", "one"))
            await until(lambda: len(fake.requests) == 1, "the first client is upstream")
            nursery.start_soon(ask, "background", request("good", "shadow"), True)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ask, "client-2", request("good", "two"))
    # The background generation asked before the second client and still went after it.
    assert order == ["client-1", "client-2", "background"]
    assert [r.body["messages"][0]["content"] for r in fake.requests] == ["one", "two", "shadow"]


class HeldExecutor(Executor):
    """An executor whose generation holds its slot until `release` is set (a long local generation)."""

    kind = "openai"

    def __init__(self) -> None:
        super().__init__("L3", TierConfig(executor="openai", base_url="http://unused", max_concurrency=1))
        self.release = trio.Event()
        self.started = 0

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        self.started += 1
        if request.model == "hold":
            await self.release.wait()
        await emit(TextDelta("done"))
        await emit(Finish("stop"))


async def test_a_background_generation_that_never_finds_an_idle_slot_is_given_up_by_its_asker(
        mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    held = HeldExecutor()
    async with running({"L3": held}) as (executor, actor), trio.open_nursery() as nursery:
        nursery.start_soon(collect, executor, "L3", request("hold"))
        await trio.testing.wait_all_tasks_blocked()
        started = trio.current_time()
        with trio.move_on_after(300) as waited:  # the ShadowActor's wait_s
            await collect(executor, "L3", request("shadow"), background=True)
        assert waited.cancelled_caught and trio.current_time() - started == pytest.approx(300)
        assert held.started == 1  # it never ran
        held.release.set()
    assert actor.in_flight["L3"] == 0 and actor.limiters["L3"].borrowed_tokens == 0
