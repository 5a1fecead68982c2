"""The CPU budget of in-process inference: request work (parsing, hashing, the L1 embedding) before generation.

Two rules (docs/architecture.md, "CPU budget"):
- `INFERENCE`, one slot for a forward pass (an embedding batch, one step of the embedded model), is handed to
  the most urgent waiter first: a request's embedding before the next generated token, FIFO within a priority.
- `REQUEST_WORK` counts request work that is waiting or running. A generation pauses between two tokens while
  it is non-zero (for at most `MAX_PAUSE_S` per token, so a side call still moves under a steady stream of
  agent turns), which keeps the cores and the GIL for the request: the agent turn is not slowed by a title.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from enum import IntEnum

MAX_PAUSE_S = 2.0  # longest a generation waits between two tokens for request work (then it takes one step)


class Priority(IntEnum):
    REQUEST = 0  # the embedding (or other forward pass) a waiting request needs now
    GENERATION = 1  # one step of the embedded model: a side call can wait a few milliseconds


class PrioritySlot:
    """A lock for threads handed over by priority, then arrival: a releaser never retakes it ahead of a waiter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = False
        self._arrival = itertools.count()
        self._waiters: list[tuple[int, int, threading.Event]] = []  # a heap of (priority, arrival, turn)

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiters)

    def acquire(self, priority: Priority) -> None:
        with self._lock:
            if not self._busy and not self._waiters:
                self._busy = True
                return
            turn = threading.Event()
            heapq.heappush(self._waiters, (int(priority), next(self._arrival), turn))
        turn.wait()  # the releaser hands the slot over: _busy stays True

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                heapq.heappop(self._waiters)[2].set()
            else:
                self._busy = False

    @contextmanager
    def held(self, priority: Priority) -> Iterator[None]:
        self.acquire(priority)
        try:
            yield
        finally:
            self.release()


class RequestWork:
    """How much request work is pending; generations wait between tokens until there is none."""

    def __init__(self, max_pause_s: float = MAX_PAUSE_S) -> None:
        self.max_pause_s = max_pause_s
        self._quiet = threading.Condition()
        self._pending = 0
        self._generating = 0  # generations running now: without one, marking request work is pointless
        self.paused_generations = 0  # generations waiting in `yield_to_requests` now (observed by tests)
        self.pauses = 0  # how often a generation waited (a counter for metrics and the bench)

    def pending(self) -> int:
        return self._pending

    @property
    def generating(self) -> bool:
        return self._generating > 0

    @contextmanager
    def generation(self) -> Iterator[None]:
        """Around a whole generation (its worker thread): while one runs, request work is counted."""
        with self._quiet:
            self._generating += 1
        try:
            yield
        finally:
            with self._quiet:
                self._generating -= 1

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Mark request work as pending for the block (Trio task or worker thread; never blocks)."""
        with self._quiet:
            self._pending += 1
        try:
            yield
        finally:
            with self._quiet:
                self._pending -= 1
                if self._pending == 0:
                    self._quiet.notify_all()

    def yield_to_requests(self) -> bool:
        """In a generation's thread, between two tokens: wait while request work is pending (bounded).

        Returns whether it waited. Cheap when nothing is pending: one read, no lock.
        """
        if self._pending == 0:
            return False
        with self._quiet:
            if self._pending == 0:
                return False
            self.paused_generations += 1
            self.pauses += 1
            try:
                self._quiet.wait_for(lambda: self._pending == 0, timeout=self.max_pause_s)
            finally:
                self.paused_generations -= 1
        return True


INFERENCE = PrioritySlot()
REQUEST_WORK = RequestWork()

# transformers imports its submodules lazily; two threads resolving them at once can see a half-made module
# ("module 'transformers' has no attribute 'AutoTokenizer'", seen at `daari serve` when the embedded model and
# the embedding model load together). Model loads take turns: hold this around import and from_pretrained.
MODEL_LOADING = threading.Lock()


def inference_slot(priority: Priority) -> AbstractContextManager[None]:
    """Hold the process-wide inference slot for one forward pass (use in a worker thread, never in Trio)."""
    return INFERENCE.held(priority)


_NO_GENERATION: AbstractContextManager[None] = nullcontext()


def request_work() -> AbstractContextManager[None]:
    """Around a request's own CPU work (parse, hash, embed): generations pause between tokens meanwhile. With no
    generation running (nearly always on the L0 hit path) it costs nothing: no lock is taken. A generation that
    starts during the work just does not pause for it."""
    return REQUEST_WORK.hold() if REQUEST_WORK.generating else _NO_GENERATION

