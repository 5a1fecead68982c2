"""Give freed heap memory back to the OS once daari goes quiet: glibc's `malloc_trim(0)`, once per quiet period.

Why: a burst (1,000 streams held at once) grows glibc's heap; when it ends, the memory is free inside the heap
but stays in daari's RSS, because glibc returns only the free top of its main heap on its own, never the free
pages between live blocks. `malloc_trim(0)` releases those pages too (docs/performance.md, "Soak"). It holds
glibc's arena lock for a few milliseconds, so it runs only when the process has used next to no CPU for a
whole interval, and once until daari is busy again. Elsewhere than glibc (musl, macOS) the task does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

import trio

log = logging.getLogger("daari.server")

# Quiet: the process used under this share of one core over an interval (an idle daari uses ~0; a client
# streaming one request a second uses more).
QUIET_CPU_SHARE = 0.01


def libc_malloc_trim() -> Callable[[], int] | None:
    """glibc's `malloc_trim(0)` (1 when memory went back to the OS), or None when the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


def is_quiet(cpu_used_s: float, interval_s: float) -> bool:
    return cpu_used_s < QUIET_CPU_SHARE * interval_s


async def trim_when_idle(interval_s: float, trim: Callable[[], int] | None,
                         cpu_seconds: Callable[[], float] = time.process_time) -> None:
    """Every `interval_s`, trim if the last interval was quiet and daari was busy since the last trim. Runs
    until cancelled (daari's shutdown); `trim` None (no glibc) returns at once."""
    if trim is None:
        log.debug("idle trim off: the C library has no malloc_trim")
        return
    busy_since_trim = True  # start-up (actors, models) allocated: the first quiet interval trims
    last = cpu_seconds()
    while True:
        await trio.sleep(interval_s)
        now = cpu_seconds()
        quiet, last = is_quiet(now - last, interval_s), now
        if not quiet:
            busy_since_trim = True
        elif busy_since_trim:
            # On the loop, not a worker thread: quiet means no request is waiting, the call takes a few ms,
            # and a thread would itself be a resource left behind for trio's idle-thread timeout.
            released = trim()
            busy_since_trim = False
            last = cpu_seconds()  # the trim's own CPU is not activity
            log.debug("idle trim: malloc_trim(0) returned %d", released)
