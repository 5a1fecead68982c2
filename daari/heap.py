"""Keep the cyclic garbage collector's pauses short: off what lives as long as the process (modules, config,
loaded models), and rarely over what lives as long as a request or a stream.

A full collection walks every tracked object with the event loop stopped. With L1's embedding model loaded
that is ~400,000 objects and ~190 ms, every request in flight waiting (a pass-through server at 500 req/s ran
one every ~5 s). `gc.freeze()` moves what is alive now into a permanent generation that collections skip, so
they walk only what requests made since. Frozen objects are still freed when their last reference goes; only
a cycle among them would never be collected, hence once per reason in a process (tests start many servers).

What requests make is young: Python collects its youngest generation after 700 net new container objects and
moves what is alive then (a request's or a stream's objects, still in use) to an older generation, and a full
collection runs whenever what was moved since the last one is a quarter of what it kept. With 1,000 streams held
(~200 objects each) that was a full collection of ~100 ms every few seconds. `server.gc_young_threshold` and
`server.gc_middle_threshold` let the young generations grow larger first, so fewer in-flight objects are moved
and the full collections come less often; a young collection's pause grows with the young generation, so the
youngest is kept small and the middle one, collected after many of them, large (docs/performance.md, "1,000
streams at once and the collector's pauses" and "Shorter young collections").
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_done: set[str] = set()
_lock = threading.Lock()  # model loads run in worker threads


def freeze_long_lived(reason: str) -> bool:
    """Collect what start-up or a load left as garbage, then freeze the rest; True the first time per reason."""
    with _lock:
        if reason in _done:
            return False
        _done.add(reason)
    gc.collect()
    gc.freeze()
    return True


_asked: list[tuple[int, int]] = []  # what each running server asked (servers of one process may overlap: tests)
_python = [gc.get_threshold()]  # the thresholds found before the first server asked


@contextmanager
def collector_thresholds(young: int, middle: int = 0) -> Iterator[None]:
    """While inside, collect the youngest generation after `young` net new container objects (0: Python's own,
    700) and the middle one after every `middle` young collections (0: Python's own, 10). The largest asked by
    the servers inside wins, each threshold apart; when the last leaves, the thresholds found before the first
    are put back."""
    with _lock:
        if not _asked:
            _python[0] = gc.get_threshold()
        _asked.append((young, middle))
        _set()
    try:
        yield
    finally:
        with _lock:
            _asked.remove((young, middle))
            _set()


def _set() -> None:
    found = _python[0]
    young = max((asked[0] for asked in _asked), default=0) or found[0]
    middle = max((asked[1] for asked in _asked), default=0) or found[1]
    gc.set_threshold(young, middle, *gc.get_threshold()[2:])
