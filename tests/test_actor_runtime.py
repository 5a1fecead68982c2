"""The actor runtime: ask/reply, errors as values, supervision, shedding, cancelled askers."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors import Actor, Health, RestartPolicy, open_mailbox, supervise
from actors.actor import ActorCrashed
from daari.errors import InvalidRequest, Overloaded


class Counter(Actor):
    name = "counter"
    instances = 0

    def __init__(self) -> None:
        Counter.instances += 1
        self.count = 0
        self.gate: trio.Event | None = None

    async def handle(self, request: object) -> object:
        if request == "boom":
            raise RuntimeError("boom")
        if request == "bad":
            raise InvalidRequest("bad request")
        if isinstance(request, trio.Event):
            await request.wait()
            return "released"
        self.count += 1
        return self.count


async def start_counter(nursery: trio.Nursery, health: Health, policy: RestartPolicy, size: int = 4):
    Counter.instances = 0
    address, inbox = open_mailbox("counter", size)
    await nursery.start(supervise, Counter, inbox, health, policy)
    return address


async def test_ask_returns_the_handlers_value_and_keeps_state() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter = await start_counter(nursery, health, RestartPolicy())
        assert [await counter.ask("inc") for _ in range(3)] == [1, 2, 3]
        assert health.status("counter").state == "running"
        nursery.cancel_scope.cancel()


async def test_expected_error_is_raised_in_the_asker_and_the_actor_goes_on() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter = await start_counter(nursery, health, RestartPolicy())
        await counter.ask("inc")
        with pytest.raises(InvalidRequest):
            await counter.ask("bad")
        assert await counter.ask("inc") == 2  # same instance, state kept
        assert health.status("counter").restarts == 0
        nursery.cancel_scope.cancel()


async def test_crash_is_reported_restarted_and_next_request_succeeds() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter = await start_counter(nursery, health, RestartPolicy(backoff_initial_s=0.01))
        await counter.ask("inc")
        with pytest.raises(ActorCrashed):
            await counter.ask("boom")
        assert await counter.ask("inc") == 1  # a fresh instance: state reset by the restart
        assert Counter.instances == 2
        assert health.status("counter").restarts == 1
        assert "boom" in (health.status("counter").last_error or "")
        nursery.cancel_scope.cancel()


async def test_too_many_crashes_mark_the_actor_failed_and_asks_fail_cleanly(mock_clock) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    async with trio.open_nursery() as nursery:
        counter = await start_counter(nursery, health, RestartPolicy(max_restarts=2, window_s=60,
                                                                    backoff_initial_s=0.1))
        for _ in range(3):
            with pytest.raises(ActorCrashed):
                await counter.ask("boom")
        await trio.testing.wait_all_tasks_blocked()
        assert health.status("counter").state == "failed"
        assert not health.healthy
        with pytest.raises(Overloaded):
            await counter.ask("inc")


async def test_full_mailbox_sheds_with_overloaded() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter = await start_counter(nursery, health, RestartPolicy(), size=1)
        gate = trio.Event()
        nursery.start_soon(counter.ask, gate)  # occupies the actor
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(counter.ask, "inc")  # fills the one mailbox slot
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(Overloaded, match="overloaded"):
            await counter.ask_or_shed("inc")
        gate.set()
        assert await counter.ask("inc") == 2
        nursery.cancel_scope.cancel()


async def test_asker_cancelled_while_waiting_in_mailbox_leaves_no_orphan() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter = await start_counter(nursery, health, RestartPolicy(), size=4)
        gate = trio.Event()
        nursery.start_soon(counter.ask, gate)
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(0.01) as waited:
            await counter.ask("inc")  # queued behind the gate, then cancelled
        assert waited.cancelled_caught
        gate.set()
        # The actor handles the abandoned message, finds its asker gone, and carries on.
        assert await counter.ask("inc") == 2
        await trio.testing.wait_all_tasks_blocked()
        # Only the supervisor, the actor run and its nursery remain: no task waits on a reply.
        tasks = _tasks_under(nursery)
        assert all("ask" not in t.name for t in tasks)
        nursery.cancel_scope.cancel()


def _tasks_under(nursery: trio.Nursery) -> list[trio.lowlevel.Task]:
    found: list[trio.lowlevel.Task] = []
    stack = list(nursery.child_tasks)
    while stack:
        task = stack.pop()
        found.append(task)
        for child in task.child_nurseries:
            stack.extend(child.child_tasks)
    return found
