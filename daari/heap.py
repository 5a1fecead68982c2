"""Keep the cyclic garbage collector off what lives as long as the process: modules, config, loaded models.

A full collection walks every tracked object with the event loop stopped. With L1's embedding model loaded
that is ~400,000 objects and ~190 ms, every request in flight waiting (a pass-through server at 500 req/s ran
one every ~5 s). `gc.freeze()` moves what is alive now into a permanent generation that collections skip, so
they walk only what requests made since. Frozen objects are still freed when their last reference goes; only
a cycle among them would never be collected, hence once per reason in a process (tests start many servers).
"""

from __future__ import annotations

import gc
import threading

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
