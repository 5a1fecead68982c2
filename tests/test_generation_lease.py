"""The ExecutorActor lends slots: a generation runs in its asker's own task (`Generations.run`), and the actor keeps
the counts, the shedding and the shutdown. A cancelled asker frees its slot; a stopping actor cancels every lease
and waits for them before it closes its executors; asked after it stopped, the door answers actor_down; between
two runs it waits for the next; the shed count holds under concurrency; one task may hold two leases.

Trio-native on virtual time (MockClock) with an in-process executor that holds its slot until told, as the
scheduling is what is tested; the same paths against a real loopback upstream are in test_asker_owned_work.py,
test_live_relay.py and test_shadow_priority.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from actors.executor import ExecutorActor, Generations
from actors.faults import FAULTS
from actors.runtime import Health, Mailbox, RestartPolicy, supervise
from daari.config import TierConfig
from daari.errors import ActorCrashed, ActorDown, Overloaded, UpstreamError
from daari.executors.base import Collect, Emit, Executor
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import Event, Finish, TextDelta, assemble


def ask(model: str) -> ChatRequest:
    return ChatRequest(messages=[Message("user", "tell me about trio")], model=model)


class HeldExecutor(Executor):
    """Answers at once, except `hold` (waits for `release`) and `explode` (fails as a buggy executor would).
    Records its generations' ends and its own close, in order."""

    kind = "openai"

    def __init__(self, concurrency: int = 1, queue: int = 64) -> None:
        super().__init__("L3", TierConfig(executor="openai", base_url="http://unused", max_concurrency=concurrency,
                                          max_queue=queue))
        self.release = trio.Event()
        self.started = 0
        self.running = 0
        self.log: list[str] = []

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        self.started += 1
        self.running += 1
        try:
            if request.model == "hold":
                await self.release.wait()
            if request.model == "explode":
                raise RuntimeError("the executor has a bug")
            await emit(TextDelta(f"answer to {request.model}"))
            await emit(Finish("stop"))
        finally:
            self.running -= 1
            self.log.append(f"ended {request.model}")

    async def aclose(self) -> None:
        self.log.append("aclose")


@pytest.fixture
def virtual_time(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    mock_clock.autojump_threshold = 0
    return mock_clock


class Supervised:
    """A supervised ExecutorActor behind its door, wired as server/actor_table.py wires it."""

    def __init__(self, executors: dict[str, Executor], policy: RestartPolicy) -> None:
        self.mailbox = Mailbox("executor", 16, FAULTS)
        self.generations = Generations()
        self.executors = executors
        self.policy = policy
        self.runs: list[ExecutorActor] = []

    def make(self) -> ExecutorActor:
        self.runs.append(ExecutorActor(self.executors, self.generations))
        return self.runs[-1]

    def on_down(self) -> None:
        self.generations.close(self.mailbox.address.down_reason or "stopped")


@asynccontextmanager
async def supervised(executors: dict[str, Executor], policy: RestartPolicy = RestartPolicy()
                     ) -> AsyncIterator[tuple[Supervised, trio.CancelScope]]:
    """Yields the actor and the scope whose cancel stops it (as daari's shutdown does)."""
    actor = Supervised(executors, policy)
    async with trio.open_nursery() as nursery:
        stop = trio.CancelScope()

        async def run() -> None:
            with stop:
                await supervise(actor.make, actor.mailbox, Health().status("executor"), policy, on_down=actor.on_down)

        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        yield actor, stop
        stop.cancel()


async def answer(generations: Generations, model: str, out: list[BaseException | str]) -> None:
    events: list[Event] = []
    try:
        await generations.run("L3", ask(model), Collect(events))
    except Exception as exc:
        out.append(exc)
    else:
        out.append(assemble(events).text)


async def test_a_cancelled_asker_frees_its_slot_and_the_next_runs(virtual_time: object) -> None:
    held = HeldExecutor()
    async with supervised({"L3": held}) as (actor, _):
        with trio.move_on_after(30) as left:  # the client went away while its generation ran
            await actor.generations.run("L3", ask("hold"), Collect([]))
        assert left.cancelled_caught and held.started == 1 and held.running == 0
        run = actor.runs[-1]
        assert run.in_flight["L3"] == 0 and run.limiters["L3"].borrowed_tokens == 0 and not run.leases
        out: list[BaseException | str] = []
        await answer(actor.generations, "next", out)
    assert out == ["answer to next"]


async def test_the_shed_count_holds_under_concurrency(virtual_time: object) -> None:
    held = HeldExecutor(concurrency=2, queue=3)
    async with supervised({"L3": held}) as (actor, _):
        out: list[BaseException | str] = []
        async with trio.open_nursery() as askers:
            for _ in range(9):
                askers.start_soon(answer, actor.generations, "hold", out)
            await trio.testing.wait_all_tasks_blocked()
            run = actor.runs[-1]
            # 2 running and 3 queued were let in; the other 4 were shed at once, in the protocol's shape.
            assert run.in_flight["L3"] == 5 and run.waiting["L3"] == 3 and held.running == 2
            assert len(out) == 4 and all(isinstance(e, Overloaded) and e.status == 503 for e in out)
            assert "tiers.L3.max_queue" in str(out[0])
            held.release.set()
        assert out[4:] == ["answer to hold"] * 5
        assert run.in_flight["L3"] == 0 and run.waiting["L3"] == 0 and run.limiters["L3"].borrowed_tokens == 0


async def stopped_while_two_ask(actor: Supervised, stop: trio.CancelScope, out: list[BaseException | str]) -> None:
    async with trio.open_nursery() as askers:
        askers.start_soon(answer, actor.generations, "hold", out)  # running
        await trio.testing.wait_all_tasks_blocked()
        askers.start_soon(answer, actor.generations, "queued", out)  # waiting for the slot
        await trio.testing.wait_all_tasks_blocked()
        stop.cancel()


async def test_stopping_the_actor_cancels_every_lease_before_it_closes_the_executors(virtual_time: object) -> None:
    held = HeldExecutor(concurrency=1)
    async with supervised({"L3": held}) as (actor, stop):
        out: list[BaseException | str] = []
        with trio.fail_after(60):  # virtual seconds: a lease the stop missed would hold its asker forever
            await stopped_while_two_ask(actor, stop, out)
        await trio.testing.wait_all_tasks_blocked()  # the actor's run and its supervisor end
        # Both askers heard the actor stopped (503 / Anthropic 529), none a silent end or a hang.
        assert len(out) == 2 and all(isinstance(e, ActorDown) and e.status == 503 for e in out)
        assert "stopped before finishing" in str(out[0])
        assert held.log == ["ended hold", "aclose"]  # the generation unwound before its pool closed
        assert held.started == 1  # the queued one never started
        later: list[BaseException | str] = []
        await answer(actor.generations, "later", later)  # the supervisor is gone: the door is closed
    assert isinstance(later[0], ActorDown) and "is down (stopped)" in str(later[0])
    assert "GET /healthz" in str(later[0])


async def test_between_two_runs_the_door_waits_for_the_next_one(virtual_time: object) -> None:
    held = HeldExecutor()
    async with supervised({"L3": held}, RestartPolicy(max_restarts=3, backoff_initial_s=1.0)) as (actor, _):
        crashed: list[BaseException] = []

        async def crash() -> None:
            try:
                await actor.mailbox.address.call(object())  # type: ignore[arg-type]  # nobody handles it: a crash
            except ActorCrashed as exc:
                crashed.append(exc)

        out: list[BaseException | str] = []
        async with trio.open_nursery() as askers:
            askers.start_soon(crash)
            await trio.testing.wait_all_tasks_blocked()  # the first run is gone; the next starts after 1 s
            assert crashed and actor.generations.actor is None
            askers.start_soon(answer, actor.generations, "meanwhile", out)
        assert out == ["answer to meanwhile"] and len(actor.runs) == 2
        assert held.log == ["aclose", "ended meanwhile"]  # the first run closed its executors; the second served


async def test_a_failing_generation_is_its_askers_upstream_error_and_touches_no_other(virtual_time: object) -> None:
    held = HeldExecutor(concurrency=2)
    async with supervised({"L3": held}) as (actor, _):
        out: list[BaseException | str] = []
        async with trio.open_nursery() as askers:
            askers.start_soon(answer, actor.generations, "hold", out)
            await trio.testing.wait_all_tasks_blocked()
            await answer(actor.generations, "explode", out)
            held.release.set()
        assert isinstance(out[0], UpstreamError) and "RuntimeError" in str(out[0]) and out[0].status == 502
        assert out[1] == "answer to hold"
        assert len(actor.runs) == 1  # the actor went on


async def test_one_task_may_hold_two_leases_on_a_tier(virtual_time: object) -> None:
    """A side question asked while the task's own generation holds a slot (a self-check in an emit): the lease,
    not the task, borrows the slot, so the second does not trip over the first."""
    held = HeldExecutor(concurrency=2)
    async with supervised({"L3": held}) as (actor, _):
        inner: list[Event] = []

        class AskingOnTheWay:
            async def __call__(self, event: Event) -> None:
                if not inner:
                    await actor.generations.run("L3", ask("inner"), Collect(inner))

        await actor.generations.run("L3", ask("outer"), AskingOnTheWay())
        assert assemble(inner).text == "answer to inner"
        assert actor.runs[-1].limiters["L3"].borrowed_tokens == 0


async def test_an_unknown_tier_is_not_found_without_a_slot(virtual_time: object) -> None:
    async with supervised({"L3": HeldExecutor()}) as (actor, _):
        with pytest.raises(Exception, match="tier L9 is not configured"):
            await actor.generations.run("L9", ask("x"), Collect([]))
        assert not actor.runs[-1].leases
