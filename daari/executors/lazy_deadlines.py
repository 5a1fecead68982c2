"""An upstream attempt's first-byte, idle and total deadlines, checked lazily by one watchdog task per Trio run.

The resilience wrapper's idle deadline moves with every upstream read: as a cancel scope's deadline that was two
deadline changes per read (suspended around the write to the client, re-armed after it), each a context manager,
a push onto Trio's deadline heap and a stale entry for the run loop to pop. Here a read only stores the time it
ended (`Watch.last`); the watchdog sleeps until the earliest moment any attempt's deadline could have passed,
and only then looks: an attempt whose upstream really was idle (or whose total time is up) has its scope
cancelled, one that was active is looked at again at its last activity plus the limit. So a deadline fires at the
same moment as a deadline kept on the scope itself (last activity + `idle_s`, start + `first_byte_s`, start +
`total_s`), one scheduler pass later (the watchdog's wake, then the attempt's), and no read pays for it.

The watchdog is a Trio system task (`trio.lowlevel.spawn_system_task`), started by the first attempt of a run and
kept in a `RunVar`: it needs no nursery of the caller's, and it ends with the run. An expiry pass that fails is
logged and the watchdog goes on (a system task's exception would end the whole run).
"""

from __future__ import annotations

import logging
import math
from heapq import heapify, heappop, heappush

import trio

log = logging.getLogger("daari.upstream")

# A finished attempt's entry stays in the heap until its time comes or the heap is pruned: pruned once it holds
# more than twice the live entries and this many more (Trio's own deadline heap does the same).
PRUNE_SLACK = 64


class Watch:
    """One attempt's deadlines. `last` is the time of the upstream's last activity (the attempt's start, then the
    end of each event or write to the client), `limit` the gap allowed after it (`first_byte_s` until the first
    event, then `idle_s`), `busy` is True while a write to the client waits (the client's time is not the
    upstream's: only the total deadline runs then)."""

    __slots__ = ("scope", "total", "last", "limit", "idle", "busy", "done", "clock")

    def __init__(self, scope: trio.CancelScope, start: float, total: float, first_byte: float, idle: float,
                 clock: trio.abc.Clock) -> None:
        self.scope = scope
        self.clock = clock  # the run's clock (`trio.current_time()` is three calls deep: an upstream read reads it)
        self.total = total
        self.last = start
        self.limit = first_byte
        self.idle = idle
        self.busy = False
        self.done = False

    def due(self, now: float) -> float:
        """The earliest time this attempt's scope may have to be cancelled, as far as is known at `now`: the
        watchdog looks again then, so what happens before it may only move the true deadline later. `last` only
        moves forward, but the first event shortens the limit (`idle_s` may be shorter than `first_byte_s`): until
        then an event at any moment from `now` would make it `now + idle`."""
        if self.busy:  # the gap starts again when the write ends, so not before now + idle
            return min(self.total, now + self.idle)
        due = self.last + self.limit
        if self.limit != self.idle and now + self.idle < due:  # no event yet
            due = now + self.idle
        return min(self.total, due)


class Watchdog:
    """The run's watchdog: a heap of (due, id, watch), one entry per live watch, and the task that sleeps until
    the first one."""

    __slots__ = ("_heap", "_live", "_sleep", "_target")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watch]] = []
        self._live = 0
        self._sleep: trio.CancelScope | None = None
        self._target = math.inf

    def add(self, watch: Watch) -> None:
        due = watch.due(watch.last)
        heap = self._heap
        heappush(heap, (due, id(watch), watch))
        self._live += 1
        if len(heap) > 2 * self._live + PRUNE_SLACK:
            heap[:] = [entry for entry in heap if not entry[2].done]
            heapify(heap)
        if due < self._target:
            self._target = due
            if self._sleep is not None:
                self._sleep.deadline = due

    def remove(self, watch: Watch) -> None:
        """The attempt ended: its entry is dropped when the watchdog next meets it (or at a prune)."""
        if not watch.done:
            watch.done = True
            self._live -= 1

    async def run(self) -> None:
        while True:
            self._sleep = trio.CancelScope(deadline=self._target)
            with self._sleep:
                await trio.sleep_forever()
            self._sleep = None
            try:
                self._expire(trio.current_time())
            except Exception:  # a system task's exception would end the whole run: log it, keep watching
                log.exception("upstream watchdog: an expiry pass failed")

    def _expire(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, key, watch = heappop(heap)
            if watch.done:
                continue
            due = watch.due(now)
            if due <= now:
                self.remove(watch)
                watch.scope.cancel()
            else:
                heappush(heap, (due, key, watch))
        while heap and heap[0][2].done:  # sleep until a live attempt's time, not a finished one's
            heappop(heap)
        self._target = heap[0][0] if heap else math.inf


_WATCHDOG: trio.lowlevel.RunVar[Watchdog] = trio.lowlevel.RunVar("daari_upstream_watchdog")


def watchdog() -> Watchdog:
    """This run's watchdog, started on first use."""
    try:
        return _WATCHDOG.get()
    except LookupError:
        dog = Watchdog()
        _WATCHDOG.set(dog)
        trio.lowlevel.spawn_system_task(dog.run, name="daari upstream watchdog")
        return dog
