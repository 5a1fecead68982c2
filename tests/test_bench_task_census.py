"""bench.task_census's instrument and arithmetic: steps, wake-ups and passes counted by task name, and the
difference of two snapshots (the counts of one load turn)."""

from __future__ import annotations

import trio

from bench.task_census import Census, _diff


async def _ping(send: trio.MemorySendChannel[int], times: int) -> None:
    for index in range(times):
        await send.send(index)


async def _pong(receive: trio.MemoryReceiveChannel[int], times: int) -> None:
    for _ in range(times):
        await receive.receive()


def test_census_counts_each_tasks_steps_and_wake_ups_by_name() -> None:
    census = Census()

    async def main() -> None:
        send, receive = trio.open_memory_channel[int](0)  # unbuffered: every item a hand-over between the tasks
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_ping, send, 50)
            nursery.start_soon(_pong, receive, 50)

    trio.run(main, instruments=[census])
    ping = next(name for name in census.steps if name.endswith("_ping"))
    pong = next(name for name in census.steps if name.endswith("_pong"))
    assert census.steps[ping] >= 50 and census.steps[pong] >= 50  # each hand-over resumes both at least once
    assert census.scheduled[ping] == census.steps[ping]  # a task runs a step only once scheduled
    assert census.spawned[ping] == census.spawned[pong] == 1 and census.exited >= 2
    assert census.passes > 0 and all(seconds >= 0 for seconds in census.step_s.values())
    snapshot = census.snapshot()
    assert snapshot["steps"][ping] == census.steps[ping] and snapshot["passes"] == census.passes


def test_diff_of_two_snapshots_keeps_what_changed_in_the_turn() -> None:
    before = {"steps": {"a": 3, "b": 5}, "scheduled": {"a": 3}, "step_s": {"a": 0.5}, "spawned": {},
              "passes": 10, "waited": 1, "exited": 0}
    after = {"steps": {"a": 7, "b": 5, "c": 2}, "scheduled": {"a": 7, "c": 2}, "step_s": {"a": 0.75},
             "spawned": {"c": 1}, "passes": 16, "waited": 1, "exited": 1}
    assert _diff(after, before) == {"steps": {"a": 4, "c": 2}, "scheduled": {"a": 4, "c": 2}, "step_s": {"a": 0.25},
                                    "spawned": {"c": 1}, "passes": 6, "waited": 0, "exited": 1}
