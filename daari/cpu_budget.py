"""One CPU budget for in-process inference (the embedding model and the embedded L3 model).

Both run torch on the same cores. Each forward pass (an embedding batch, one generation step) takes the
slot in arrival order, so an embedding batch slips in between two generated tokens instead of the two
fighting for the cores at once (which slows both) or the batch waiting for a whole generation.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager


class FairSlot:
    """A FIFO lock for threads: a releasing thread cannot take the slot back ahead of one already waiting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = False
        self._waiters: deque[threading.Event] = deque()

    def acquire(self) -> None:
        with self._lock:
            if not self._busy and not self._waiters:
                self._busy = True
                return
            turn = threading.Event()
            self._waiters.append(turn)
        turn.wait()  # the releaser hands the slot over: _busy stays True

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().set()
            else:
                self._busy = False

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


INFERENCE = FairSlot()

# transformers imports its submodules lazily; two threads resolving them at once can see a half-made module
# ("module 'transformers' has no attribute 'AutoTokenizer'", seen at `daari serve` when the embedded model and
# the embedding model load together). Model loads take turns: hold this around import and from_pretrained.
MODEL_LOADING = threading.Lock()


def inference_slot() -> AbstractContextManager[None]:
    """Hold the process-wide inference slot for one forward pass (use in a worker thread, never in Trio)."""
    return INFERENCE.held()
