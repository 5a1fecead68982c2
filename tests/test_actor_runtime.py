"""The generic actor runtime: typed calls, asker-owned replies and streams, batches, supervision, the table."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
import trio
import trio.testing

from actors.runtime import (
    Actor,
    ActorBusy,
    ActorCrashed,
    ActorDown,
    ActorSpec,
    Address,
    Call,
    Faults,
    Health,
    Mailbox,
    Outbox,
    Pending,
    RestartPolicy,
    Stream,
    batches,
    handles,
    start_actors,
    streams,
    supervise,
)


class Refused(Exception):
    """An expected error: the answer to a bad request, not a crash."""


@dataclass(frozen=True)
class Inc(Call[int]):
    pass


@dataclass(frozen=True)
class Boom(Call[None]):
    pass


@dataclass(frozen=True)
class Bad(Call[None]):
    pass


@dataclass(frozen=True)
class Hold(Call[str]):
    """Occupies the serial loop until `gate` is set."""

    gate: trio.Event


@dataclass(frozen=True)
class Slow(Call[str]):
    """A concurrent call that waits on `gate`; records whether it was cancelled."""

    gate: trio.Event


@dataclass(frozen=True)
class Count(Stream[int]):
    upto: int
    fail_at: int | None = None


FAULTS = Faults(expected=(Refused,))


class Counter(Actor):
    name = "counter"
    instances = 0

    def __init__(self) -> None:
        Counter.instances += 1
        self.count = 0
        self.started_streams = 0
        self.cancelled: list[str] = []

    @handles(Inc)
    async def inc(self, request: Inc) -> int:
        self.count += 1
        return self.count

    @handles(Boom)
    async def boom(self, request: Boom) -> None:
        raise RuntimeError("boom")

    @handles(Bad)
    async def bad(self, request: Bad) -> None:
        raise Refused("bad request")

    @handles(Hold)
    async def hold(self, request: Hold) -> str:
        await request.gate.wait()
        return "released"

    @handles(Slow, concurrent=True)
    async def slow(self, request: Slow) -> str:
        try:
            await request.gate.wait()
        except trio.Cancelled:
            self.cancelled.append("slow")
            raise
        return "done"

    @streams(Count)
    async def counting(self, request: Count, out: Outbox[int]) -> None:
        self.started_streams += 1
        try:
            for i in range(request.upto):
                if i == request.fail_at:
                    raise RuntimeError("generation failed")
                await out.send(i)
                await trio.sleep(1)
        except trio.Cancelled:
            self.cancelled.append(f"count{request.upto}")
            raise


async def start(nursery: trio.Nursery, health: Health, policy: RestartPolicy = RestartPolicy(),
                size: int = 4, factory: type[Actor] = Counter) -> tuple[Address, list[Actor]]:
    made: list[Actor] = []

    def make() -> Actor:
        made.append(factory())
        return made[-1]

    mailbox = Mailbox("counter", size, FAULTS)
    await nursery.start(supervise, make, mailbox, health.status("counter"), policy)
    return mailbox.address, made


async def test_a_call_returns_its_typed_reply_and_the_actor_keeps_state() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, _ = await start(nursery, health)
        assert [await counter.call(Inc()) for _ in range(3)] == [1, 2, 3]
        assert health.status("counter").state == "running"
        nursery.cancel_scope.cancel()


async def test_an_expected_error_is_raised_in_the_asker_and_the_actor_goes_on() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        await counter.call(Inc())
        with pytest.raises(Refused):
            await counter.call(Bad())
        assert await counter.call(Inc()) == 2  # same instance, state kept
        assert len(made) == 1 and health.status("counter").restarts == 0
        nursery.cancel_scope.cancel()


async def test_a_crash_is_answered_restarted_and_the_next_call_succeeds(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        await counter.call(Inc())
        with pytest.raises(ActorCrashed, match="counter actor failed: RuntimeError"):
            await counter.call(Boom())
        assert await counter.call(Inc()) == 1  # a fresh instance: state reset by the restart
        assert len(made) == 2
        assert health.status("counter").restarts == 1
        assert "boom" in (health.status("counter").last_error or "")
        nursery.cancel_scope.cancel()


async def test_a_message_nobody_handles_crashes_the_actor_and_is_answered(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        with pytest.raises(ActorCrashed):
            await counter.call(object())  # type: ignore[arg-type]
        assert await counter.call(Inc()) == 1 and len(made) == 2
        nursery.cancel_scope.cancel()


async def test_giving_up_fails_every_queued_and_every_later_call_at_once(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    outcomes: list[str] = []

    async def queued(request: Call[object]) -> None:
        try:
            await counter.call(request)
            outcomes.append("answered")
        except ActorDown as exc:
            outcomes.append(f"down: {exc}")
        except ActorCrashed:
            outcomes.append("crashed")

    async with trio.open_nursery() as nursery:
        counter, _ = await start(nursery, health, RestartPolicy(max_restarts=0, backoff_initial_s=0.1), size=8)
        gate = trio.Event()
        nursery.start_soon(queued, Hold(gate))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(queued, Boom())  # will crash the only allowed run
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(3):
            nursery.start_soon(queued, Inc())  # queued behind the crash
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
        with trio.fail_after(1):  # mock time: fails only if some ask hangs
            while len(outcomes) < 5:
                await trio.sleep(0.01)
        assert health.status("counter").state == "failed"
        assert outcomes[:2] == ["answered", "crashed"]
        assert all(o.startswith("down: the counter actor is down (gave up after RuntimeError") for o in outcomes[2:])
        with trio.fail_after(1), pytest.raises(ActorDown):
            await counter.call(Inc())
        with pytest.raises(ActorDown):
            async with counter.stream(Count(3)):
                pass


async def test_senders_waiting_for_room_fail_when_the_supervisor_gives_up(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, _ = await start(nursery, health, RestartPolicy(max_restarts=0), size=1)
        gate = trio.Event()
        nursery.start_soon(counter.call, Hold(gate))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(_expect, counter, Boom(), ActorCrashed)  # fills the one slot
        await trio.testing.wait_all_tasks_blocked()
        results: list[str] = []

        async def waiting_for_room() -> None:
            with pytest.raises(ActorDown):
                await counter.call(Inc())
            results.append("down")

        nursery.start_soon(waiting_for_room)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
        with trio.fail_after(1):
            while not results:
                await trio.sleep(0.01)


async def _expect(address: Address, request: Call[object], error: type[BaseException]) -> None:
    with pytest.raises(error):
        await address.call(request)


class FailsOnRestart(Counter):
    runs = 0

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        FailsOnRestart.runs += 1
        if FailsOnRestart.runs > 1:
            raise OSError("resource gone")
        yield


async def test_a_lifespan_that_fails_closes_its_mailbox_clone() -> None:
    mailbox = Mailbox("counter", 4)
    clone = mailbox.inbox.clone()
    FailsOnRestart.runs = 1
    with pytest.raises(OSError):
        await FailsOnRestart().serve_inbox(clone)
    with pytest.raises(trio.ClosedResourceError):
        clone.receive_nowait()


async def test_a_lifespan_failing_during_restarts_ends_in_failed_and_asks_fail_fast(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    FailsOnRestart.runs = 0
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, _ = await start(nursery, health, RestartPolicy(max_restarts=2), factory=FailsOnRestart)
        with pytest.raises(ActorCrashed):
            await counter.call(Boom())
        with trio.fail_after(10):
            with pytest.raises(ActorDown, match="OSError: resource gone"):
                await counter.call(Inc())
        assert health.status("counter").state == "failed"
        assert FailsOnRestart.runs == 3


async def test_a_full_mailbox_sheds_when_asked_to() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, _ = await start(nursery, health, size=1)
        gate = trio.Event()
        nursery.start_soon(counter.call, Hold(gate))  # occupies the actor
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(counter.call, Inc())  # fills the one mailbox slot
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(ActorBusy, match="overloaded"):
            await counter.call_or_shed(Inc())
        gate.set()
        assert await counter.call(Inc()) == 2
        nursery.cancel_scope.cancel()


async def test_a_call_whose_asker_left_while_queued_is_never_handled() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        gate = trio.Event()
        nursery.start_soon(counter.call, Hold(gate))
        await trio.testing.wait_all_tasks_blocked()
        with trio.CancelScope() as left:
            nursery.start_soon(lambda: _cancel_when_blocked(left))
            await counter.call(Inc())  # queued behind the gate, then its asker leaves
        assert left.cancelled_caught
        gate.set()
        # The abandoned Inc was skipped: this is the first increment the actor ever handled.
        assert await counter.call(Inc()) == 1
        assert isinstance(made[0], Counter) and made[0].count == 1
        nursery.cancel_scope.cancel()


async def _cancel_when_blocked(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()


async def test_a_concurrent_call_is_cancelled_at_once_when_its_asker_leaves() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        actor = made[0]
        assert isinstance(actor, Counter)
        with trio.CancelScope() as left:
            nursery.start_soon(lambda: _cancel_when_blocked(left))
            await counter.call(Slow(trio.Event()))
        await trio.testing.wait_all_tasks_blocked()
        assert actor.cancelled == ["slow"]
        # Concurrent calls do not hold up the mailbox: a serial call is answered while one is running.
        gate = trio.Event()
        nursery.start_soon(counter.call, Slow(gate))
        assert await counter.call(Inc()) == 1
        gate.set()
        nursery.cancel_scope.cancel()


async def test_a_stream_delivers_typed_items_and_leaving_it_cancels_the_work_at_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        actor = made[0]
        assert isinstance(actor, Counter)
        async with counter.stream(Count(3)) as items:
            assert [i async for i in items] == [0, 1, 2]
        async with counter.stream(Count(100)) as items:
            assert await items.receive() == 0
        await trio.testing.wait_all_tasks_blocked()
        assert actor.cancelled == ["count100"]
        nursery.cancel_scope.cancel()


async def test_a_stream_whose_asker_left_while_queued_never_starts() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        actor = made[0]
        assert isinstance(actor, Counter)
        gate = trio.Event()
        nursery.start_soon(counter.call, Hold(gate))
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(3):
            async with counter.stream(Count(5)):
                pass  # sent, queued behind Hold, and left before the actor got to it
        gate.set()
        assert await counter.call(Inc()) == 1
        await trio.testing.wait_all_tasks_blocked()
        assert actor.started_streams == 0
        nursery.cancel_scope.cancel()


async def test_one_failing_stream_touches_no_other_and_the_actor_goes_on(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    got: list[int] = []

    async def healthy() -> None:
        async with counter.stream(Count(4)) as items:
            got.extend([i async for i in items])

    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        async with trio.open_nursery() as clients:
            clients.start_soon(healthy)
            async with counter.stream(Count(4, fail_at=2)) as items:
                with pytest.raises(ActorCrashed):
                    async for _ in items:
                        pass
            assert await counter.call(Inc()) == 1
        assert len(made) == 1 and health.status("counter").restarts == 0
        nursery.cancel_scope.cancel()
    assert got == [0, 1, 2, 3]


async def test_a_stream_cut_by_a_crash_raises_in_the_reader_instead_of_ending_quietly(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, _ = await start(nursery, health)
        async with counter.stream(Count(10)) as items:
            assert await items.receive() == 0
            with pytest.raises(ActorCrashed):
                await counter.call(Boom())  # the crash cancels the run, and with it this stream
            with pytest.raises(ActorDown, match="stopped before finishing"):
                async for _ in items:
                    pass
        nursery.cancel_scope.cancel()


# --- batches and deferred replies ----------------------------------------------------------------------


@dataclass(frozen=True)
class Embed(Call[str]):
    text: str


class Batcher(Actor):
    name = "batcher"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.deferred: list[Pending[Embed, str]] = []

    @batches(Embed, max_items=4, max_wait_s=0.05)
    async def embed(self, calls: list[Pending[Embed, str]]) -> None:
        self.batches.append([c.message.text for c in calls])
        for call in calls:
            if call.message.text == "later":
                self.deferred.append(call)  # answered after the handler returned
            else:
                call.answer(call.message.text.upper())

    @handles(Inc)
    async def inc(self, request: Inc) -> int:
        return len(self.batches)


async def test_a_batch_takes_what_arrives_within_the_wait_up_to_max_items(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    answers: dict[str, str] = {}

    async def ask(address: Address, text: str, delay: float) -> None:
        await trio.sleep(delay)
        answers[text] = await address.call(Embed(text))

    async with trio.open_nursery() as nursery:
        batcher, made = await start(nursery, health, size=16, factory=Batcher)
        actor = made[0]
        assert isinstance(actor, Batcher)
        async with trio.open_nursery() as askers:
            for i in range(6):  # six at once: a full batch of four, then two
                askers.start_soon(ask, batcher, f"a{i}", 0)
            askers.start_soon(ask, batcher, "b", 0.03)  # inside the second batch's 50 ms wait
            askers.start_soon(ask, batcher, "c", 0.2)  # long after: a batch of its own
        assert [len(b) for b in actor.batches] == [4, 3, 1]
        assert actor.batches[1][-1] == "b" and actor.batches[2] == ["c"]
        assert answers["a5"] == "A5" and answers["c"] == "C"
        nursery.cancel_scope.cancel()


async def test_a_batch_ends_at_another_kind_of_message_and_skips_abandoned_calls(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    async with trio.open_nursery() as nursery:
        batcher, made = await start(nursery, health, size=16, factory=Batcher)
        actor = made[0]
        assert isinstance(actor, Batcher)
        with trio.move_on_after(0.01):
            await batcher.call(Embed("gone"))  # left during the 50 ms wait: dropped from its batch
        async with trio.open_nursery() as askers:
            askers.start_soon(batcher.call, Embed("x"))
            await trio.testing.wait_all_tasks_blocked()
            assert await batcher.call(Inc()) == 1  # ends the batch [x] at once, then is answered
        assert actor.batches == [["x"]]
        nursery.cancel_scope.cancel()


async def test_a_deferred_reply_is_answered_later_or_fails_when_the_actor_stops(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as nursery:
            batcher, made = await start(nursery, health, size=16, factory=Batcher)
            actor = made[0]
            assert isinstance(actor, Batcher)
            later: list[str] = []

            async def ask_later() -> None:
                later.append(await batcher.call(Embed("later")))

            nursery.start_soon(ask_later)
            await trio.sleep(0.1)  # mock time: past the batch's 50 ms wait
            assert actor.deferred and not later
            actor.deferred.pop().answer("finally")
            await trio.testing.wait_all_tasks_blocked()
            assert later == ["finally"]

            async def never_answered() -> None:
                with pytest.raises(ActorDown, match="stopped before answering"):
                    await batcher.call(Embed("later"))
                later.append("down")

            outer.start_soon(never_answered)
            await trio.sleep(0.1)
            assert actor.deferred
            nursery.cancel_scope.cancel()  # the actor stops owing a reply
        with trio.fail_after(1):
            while later[-1] != "down":
                await trio.sleep(0.01)


# --- the table ---------------------------------------------------------------------------------------------


async def test_start_actors_runs_the_table_in_order_with_its_mailbox_sizes() -> None:
    health = Health()
    table = [ActorSpec("counter", Counter, mailbox_size=1), ActorSpec("batcher", Batcher, mailbox_size=8)]
    async with trio.open_nursery() as nursery:
        addresses = await start_actors(nursery, table, health, FAULTS)
        assert list(addresses) == ["counter", "batcher"]
        assert [s.state for s in health.actors.values()] == ["running", "running"]
        gate = trio.Event()
        nursery.start_soon(addresses["counter"].call, Hold(gate))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(addresses["counter"].call, Inc())
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(ActorBusy):
            await addresses["counter"].call_or_shed(Inc())  # its mailbox of one is full
        assert await addresses["batcher"].call(Embed("x")) == "X"
        with pytest.raises(ValueError, match="two actors named counter"):
            await start_actors(nursery, [table[0], table[0]], Health(), FAULTS)
        gate.set()
        nursery.cancel_scope.cancel()


# --- crashes with work in flight, restarts over time, queue depth ------------------------------------------


async def test_concurrent_askers_in_flight_when_the_actor_crashes_are_answered(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A crash cancels the run's concurrent tasks: each asker hears the actor went down, none waits forever."""
    mock_clock.autojump_threshold = 0
    health = Health()
    outcomes: list[str] = []

    async def slow_asker(counter: Address) -> None:
        try:
            await counter.call(Slow(trio.Event()))  # never released: only the crash ends it
            outcomes.append("answered")
        except ActorDown:
            outcomes.append("down")

    async with trio.open_nursery() as nursery:
        counter, made = await start(nursery, health)
        async with trio.open_nursery() as askers:
            for _ in range(2):
                askers.start_soon(slow_asker, counter)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(ActorCrashed):
                await counter.call(Boom())
            with trio.fail_after(60):  # mock time: reached only if an asker hangs
                await trio.testing.wait_all_tasks_blocked()
                while len(outcomes) < 2:
                    await trio.sleep(1)
        assert outcomes == ["down", "down"]
        assert isinstance(made[0], Counter) and made[0].cancelled == ["slow", "slow"]
        assert await counter.call(Inc()) == 1  # restarted
        nursery.cancel_scope.cancel()


@dataclass(frozen=True)
class Crash(Call[str]):
    """Embedded in a batch: makes the batch handler crash."""


class CrashingBatcher(Batcher):
    @batches(Embed, max_items=4, max_wait_s=0.05)
    async def embed(self, calls: list[Pending[Embed, str]]) -> None:
        if any(call.message.text == "crash" for call in calls):
            raise RuntimeError("batch handler failed")
        for call in calls:
            call.answer(call.message.text.upper())


async def test_a_message_looked_ahead_by_a_crashing_batch_is_answered(mock_clock: trio.testing.MockClock) -> None:
    """The batch's wait took the next message (another type) out of the mailbox; the batch crashed: that asker
    is told, not left waiting on a message nobody holds any more."""
    mock_clock.autojump_threshold = 0
    health = Health()
    results: dict[str, str] = {}

    async def ask(name: str, address: Address, message: Call[object]) -> None:
        try:
            results[name] = str(await address.call(message))
        except (ActorCrashed, ActorDown) as exc:
            results[name] = type(exc).__name__

    async with trio.open_nursery() as nursery:
        batcher, _ = await start(nursery, health, size=16, factory=CrashingBatcher)
        async with trio.open_nursery() as askers:
            askers.start_soon(ask, "crash", batcher, Embed("crash"))
            await trio.testing.wait_all_tasks_blocked()  # the batch is waiting for more Embeds
            askers.start_soon(ask, "inc", batcher, Inc())  # ends the batch: held as its look-ahead
            with trio.fail_after(60):  # mock time: reached only if an asker hangs
                while len(results) < 2:
                    await trio.sleep(1)
        assert results["crash"] == "ActorCrashed" and results["inc"] == "ActorDown"
        assert await batcher.call(Embed("again")) == "AGAIN"  # restarted
        nursery.cancel_scope.cancel()


async def test_restart_backoff_starts_over_after_a_healthy_period(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    health = Health()
    policy = RestartPolicy(max_restarts=10, window_s=60, backoff_initial_s=1, backoff_max_s=30)

    async def restart_delay(counter: Address) -> float:
        with pytest.raises(ActorCrashed):
            await counter.call(Boom())
        crashed = trio.current_time()
        await counter.call(Inc())  # waits in the mailbox until the next run
        return trio.current_time() - crashed

    async with trio.open_nursery() as nursery:
        counter, _ = await start(nursery, health, policy)
        burst = [await restart_delay(counter) for _ in range(4)]
        await trio.sleep(policy.window_s * 2)  # healthy, no crash for two windows
        after_quiet = await restart_delay(counter)
        nursery.cancel_scope.cancel()
    assert burst == [1, 2, 4, 8]
    assert after_quiet == 1


async def test_each_actors_queue_depth_is_reported() -> None:
    health = Health()
    async with trio.open_nursery() as nursery:
        counter, _ = await start(nursery, health, size=8)
        status = health.status("counter")
        assert status.depth == 0 and status.capacity == 8
        gate = trio.Event()
        nursery.start_soon(counter.call, Hold(gate))
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(3):
            nursery.start_soon(counter.call, Inc())
        await trio.testing.wait_all_tasks_blocked()
        assert status.depth == 3  # waiting behind Hold
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert status.depth == 0
        nursery.cancel_scope.cancel()


class NeverStarts(Actor):
    name = "optional"

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        raise OSError("read-only data dir")
        yield


async def test_an_actor_that_is_not_required_cannot_hold_up_the_start_or_the_health(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A decision log that cannot open: the table does not wait for it, its start failures are restarted like
    crashes up to the cap, then it is failed while the required actors keep the program healthy."""
    mock_clock.autojump_threshold = 0
    health = Health()
    downs: list[str] = []
    table = [ActorSpec("counter", Counter),
             ActorSpec("optional", NeverStarts, policy=RestartPolicy(max_restarts=2), required=False,
                       on_down=lambda: downs.append("optional"))]
    async with trio.open_nursery() as nursery:
        addresses = await start_actors(nursery, table, health, FAULTS)
        assert await addresses["counter"].call(Inc()) == 1
        with trio.fail_after(30):
            while health.status("optional").state != "failed":
                await trio.sleep(0.01)
        assert health.status("optional").restarts == 2 and downs == ["optional"]
        assert health.healthy  # the counter is required and running; the failed optional actor is shown, not fatal
        nursery.cancel_scope.cancel()


async def test_on_down_runs_when_a_required_actor_stops_with_its_runtime() -> None:
    health = Health()
    downs: list[str] = []
    async with trio.open_nursery() as nursery:
        await start_actors(nursery, [ActorSpec("counter", Counter, on_down=lambda: downs.append("counter"))],
                           health, FAULTS)
        assert downs == []
        nursery.cancel_scope.cancel()
    assert downs == ["counter"]


# --- a stream read in runs (StreamReader.batches) -------------------------------------------------------


async def test_a_stream_read_in_batches_gets_what_was_queued_in_one_run_and_then_how_it_ended() -> None:
    from actors.runtime.reply import open_stream

    outbox, reader = open_stream(8, lambda: ActorDown("stopped"))
    for item in (0, 1, 2):
        await outbox.send(item)
    outbox.fail(Refused("the upstream broke off"))
    runs: list[list[int]] = []
    with pytest.raises(Refused, match="broke off"):
        async for run in reader.batches():
            runs.append(run)
    assert runs == [[0, 1, 2]]  # the items before the failure are all delivered, the failure after them


async def test_a_batch_never_waits_for_an_item_not_yet_sent(mock_clock: trio.testing.MockClock) -> None:
    from actors.runtime.reply import open_stream

    mock_clock.autojump_threshold = 0
    outbox, reader = open_stream(8, lambda: ActorDown("stopped"))
    runs: list[tuple[float, list[int]]] = []

    async def produce() -> None:
        await outbox.send(0)
        await outbox.send(1)
        await trio.sleep(5)
        await outbox.send(2)
        outbox.finish()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        await trio.sleep(1)  # 0 and 1 are queued by now
        async for run in reader.batches():
            runs.append((trio.current_time(), run))
    assert [r for _, r in runs] == [[0, 1], [2]]
    assert runs[0][0] < 5 <= runs[1][0]  # the first run went out before the third item existed


async def test_send_nowait_fills_the_askers_buffer_then_says_full_and_breaks_once_the_asker_left() -> None:
    from actors.runtime.reply import open_stream

    outbox, reader = open_stream(2, lambda: ActorDown("stopped"))
    assert outbox.send_nowait(0) and outbox.send_nowait(1)
    assert not outbox.send_nowait(2)  # full: the caller must await send (and wait for the asker)
    assert await reader.receive() == 0
    assert outbox.send_nowait(2)
    reader.abandon()
    with pytest.raises(trio.BrokenResourceError):
        outbox.send_nowait(3)


async def test_a_stream_failure_reaches_the_reader_with_its_own_cause() -> None:
    from actors.runtime.reply import open_stream

    outbox, reader = open_stream(8, lambda: ActorDown("stopped"))
    root = ConnectionResetError("the upstream reset the connection")
    try:
        raise Refused("the upstream broke off") from root
    except Refused as failure:
        outbox.fail(failure)
    with pytest.raises(Refused) as raised:
        async for _ in reader:
            pass
    # The reader raises the actor's error where it did not happen; the chain must still lead to the real cause.
    assert raised.value.__cause__ is root
    assert raised.value.__suppress_context__  # the reader's own EndOfChannel is not shown as part of it
