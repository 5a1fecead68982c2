"""Keep the cyclic garbage collector off what lives as long as the process (modules, config, loaded models),
and off the requests in flight.

A full collection walks every tracked object with the event loop stopped. With L1's embedding model loaded
that is ~400,000 objects and ~190 ms, every request in flight waiting (a pass-through server at 500 req/s ran
one every ~5 s). `gc.freeze()` moves what is alive now into a permanent generation that collections skip, so
they walk only what requests made since. Frozen objects are still freed when their last reference goes; only
a cycle among them would never be collected, hence once per reason in a process (tests start many servers).

Young collections run every YOUNG_THRESHOLD net allocations instead of CPython's 700: each walks what the
requests in flight hold, so at 700 a server at 20 connections walked the same in-flight objects ~50 times a
second (43-50 us of GC a pass-through request; 16-19 us at 10,000, each pause 5-6 ms instead of ~1 ms).
"""

from __future__ import annotations

import gc
import threading

YOUNG_THRESHOLD = 10_000
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


def collect_young_less_often() -> None:
    """The young generation's threshold raised to YOUNG_THRESHOLD; the older generations' stay CPython's."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
