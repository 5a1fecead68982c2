"""`python -m bench.actor_overhead`: what the actor runtime itself costs per call and per stream, and what a
generation costs on a slot the ExecutorActor lends (in the asker's task, no mailbox).

In-process, no network: a typed call's round trip, a runtime stream of 10 items (the hop a generation made before
it ran in the asker's task), and a generation of 10 events from an executor that emits at once (everything but
the upstream). CPU-bound; run it on a quiet machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import trio

from actors.executor import ExecutorActor, Generations
from actors.faults import FAULTS
from actors.runtime import Actor, Call, Health, Mailbox, Outbox, Stream, handles, streams, supervise
from bench.report import Table, print_tables
from daari.config import TierConfig
from daari.executors.base import Collect, Emit, Executor
from daari.protocol.chat import ChatRequest
from daari.protocol.events import TextDelta


@dataclass(frozen=True)
class Ping(Call[int]):
    pass


@dataclass(frozen=True)
class Ten(Stream[int]):
    pass


class Echo(Actor):
    name = "echo"

    @handles(Ping)
    async def ping(self, request: Ping) -> int:
        return 1

    @streams(Ten)
    async def ten(self, request: Ten, out: Outbox[int]) -> None:
        for item in range(10):
            await out.send(item)


class TenEvents(Executor):
    kind = "bench"

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        for _ in range(10):
            await emit(TextDelta("a"))


async def _measure(calls: int, streams: int) -> Table:
    echo, executor = Mailbox("echo", 64, FAULTS), Mailbox("executor", 64, FAULTS)
    executors: dict[str, Executor] = {"L3": TenEvents("L3", TierConfig(executor="openai"))}
    table = Table("actor runtime overhead (in-process)", ["what", "µs each", "count"])
    generations = Generations()
    async with trio.open_nursery() as nursery:
        await nursery.start(supervise, Echo, echo, Health().status("echo"))
        await nursery.start(supervise, lambda: ExecutorActor(executors, generations), executor,
                            Health().status("executor"))
        started = time.perf_counter()
        for _ in range(calls):
            await echo.address.call(Ping())
        table.add("call round trip (typed Call, asker-owned Reply)", (time.perf_counter() - started) / calls * 1e6,
                  calls)
        started = time.perf_counter()
        for _ in range(streams):
            async with echo.address.stream(Ten()) as items:
                async for _ in items:
                    pass
        table.add("runtime stream of 10 items (mailbox, task, channel)", (time.perf_counter() - started) / streams
                  * 1e6, streams)
        request: Any = ChatRequest(messages=[], model="bench")
        started = time.perf_counter()
        for _ in range(streams):
            await generations.run("L3", request, Collect([]))
        table.add("generation of 10 events (a lent slot, in the asker's task)",
                  (time.perf_counter() - started) / streams * 1e6, streams)
        nursery.cancel_scope.cancel()
    return table


def main() -> None:
    print_tables([trio.run(_measure, 20000, 5000)])


if __name__ == "__main__":
    main()
