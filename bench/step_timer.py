"""Time spent per pipeline step (or per wrapped call) inside a real daari, for the benches that break a request down.

`time_steps(pipeline, spent, clock)` wraps every step of `server.parts.pipeline` so that what it costs, its awaits
included, is added to `spent[name]`; `timed(name, call, spent, clock)` does the same for one async callable. The
clock says what is counted: `time.thread_time` (the event loop thread's CPU), `time.process_time` (every thread's
CPU) or `time.perf_counter` (wall time). Requests are meant to run one at a time, so what runs during a step's
await is that request's own work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Clock = Callable[[], float]


class TimedStep:
    """A pipeline step whose cost by `clock`, its awaits included, is added to `spent[step.name]`."""

    def __init__(self, step: Any, spent: dict[str, float], clock: Clock, prefix: str = "") -> None:
        self.step = step
        self.name = step.name
        self.key = prefix + step.name
        self.spent = spent
        self.clock = clock

    async def __call__(self, *args: Any) -> Any:
        started = self.clock()
        try:
            return await self.step(*args)
        finally:
            self.spent[self.key] = self.spent.get(self.key, 0.0) + self.clock() - started


def time_steps(pipeline: Any, spent: dict[str, float], clock: Clock, finish_prefix: str = "") -> None:
    """Wrap every step of `pipeline` (local, routed and finish) in a TimedStep."""
    pipeline.local = tuple(TimedStep(step, spent, clock) for step in pipeline.local)
    pipeline.routed = tuple(TimedStep(step, spent, clock) for step in pipeline.routed)
    pipeline.finish = tuple(TimedStep(step, spent, clock, finish_prefix) for step in pipeline.finish)


def timed(name: str, call: Any, spent: dict[str, float], clock: Clock) -> Any:
    """`call` (async) with its cost by `clock` added to `spent[name]`."""
    async def timed_call(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return await call(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + clock() - started
    return timed_call
