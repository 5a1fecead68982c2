"""`python -m bench.heap_probe --out DIR [--frames N] serve ...`: `daari` run in this process, its heap observable.

A bench harness, not part of daari: the soak (`python -m bench.soak --trace`) launches daari through it to find
what holds memory. The first SIGUSR1 (the baseline) starts tracemalloc, so what is traced is what was allocated
after it and is still alive (start-up under tracemalloc took over a minute); each SIGUSR1 writes `report-<n>.json`
(RSS, glibc's malloc statistics, CPython's small-object arenas,
Python's allocated blocks, the bounded caches' entries and measured sizes,
the most common live object types) and `snapshot-<n>.tracemalloc` (diffed by the soak); SIGUSR2 calls glibc's
`malloc_trim(0)` and writes the RSS before and after to `trim-<n>.json`. The handlers run on the main thread
between two bytecodes of the event loop, so what they see is a consistent heap.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import re
import runpy
import signal
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from types import FrameType, FunctionType, ModuleType
from typing import Any

import psutil

MIB = 1024 * 1024


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def mallinfo() -> dict[str, float]:
    """glibc's heap: bytes in its arenas (`arena`, mmap'd blocks `hblkhd`), in use (`uordblks`), free (`fordblks`)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return {}
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    return {name: round(getattr(info, name) / MIB, 2) for name in ("arena", "hblkhd", "uordblks", "fordblks")}


_PYMALLOC_LINES = {"# arenas allocated current": "arenas", "# bytes in allocated blocks": "in_use",
                   "# bytes in available blocks": "free_in_pools", "unused pools": "free_pools"}


def pymalloc() -> dict[str, float]:
    """CPython's small-object allocator (objects up to 512 bytes, in 1 MiB arenas): MiB of arenas held, of blocks in
    use, of free blocks in partly used pools and of wholly free pools. An arena goes back to the OS only when all
    its pools are free, so free blocks here are RSS. Parsed from `sys._debugmallocstats()`, which writes to fd 2;
    empty when pymalloc is not the allocator in use (tracemalloc's hooks, `PYTHONMALLOC=malloc`): use --frames 0."""
    with tempfile.TemporaryFile("w+") as out:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()
    found: dict[str, float] = {}
    for line in text.splitlines():
        for marker, name in _PYMALLOC_LINES.items():
            if marker in line and name not in found:
                number = int(re.sub(r"[^0-9]", "", line.rpartition("=")[2]))
                found[name] = number if name == "arenas" else round(number / MIB, 2)
    return found


_SHARED = (type, ModuleType, FunctionType, FrameType)


def deep_size(root: Any, limit: int = 2_000_000) -> int:
    """Bytes of `root` and what it reaches, not counting classes, modules, functions and frames (shared code)."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj, 0)
        stack.extend(gc.get_referents(obj))
    return total


def _owner(referrer: Any) -> Any:
    """The instance whose `__dict__` `referrer` is, else `referrer`: once an instance's attribute dict exists
    as an object (deep_size's walk makes it so), it, not the instance, is what refers to the cache."""
    if isinstance(referrer, dict):
        return next((o for o in gc.get_referrers(referrer) if getattr(o, "__dict__", None) is referrer), referrer)
    return referrer


def bounded_caches() -> list[dict[str, Any]]:
    """Every live `LRU` (L0's memory front, the key memo, the hit lane's requests, L1's probes...) and what
    holds it, with its declared size and the bytes it reaches."""
    from daari.cache.lru import LRU

    found = []
    for obj in gc.get_objects():
        if isinstance(obj, LRU):
            owners = [type(o).__qualname__ for o in map(_owner, gc.get_referrers(obj))
                      if hasattr(o, "__dict__") and not isinstance(o, _SHARED)]
            holder = owners[0] if owners else "?"
            found.append({"holder": holder, "entries": len(obj._items), "declared_mib": round(obj.bytes / MIB, 2),
                          "max_mib": round(obj.max_bytes / MIB, 2), "measured_mib": round(deep_size(obj) / MIB, 2)})
    return found


class Probe:
    def __init__(self, out: Path, frames: int) -> None:
        self.out = out
        self.frames = frames
        self.reports = 0
        self.trims = 0

    def report(self, signum: int, frame: FrameType | None) -> None:
        started = time.monotonic()
        if self.reports == 0:
            if self.frames:
                tracemalloc.start(self.frames)
            gc.unfreeze()  # daari froze its start-up heap (daari/heap.py): gc.get_objects() would not list it
        self.reports += 1
        n = self.reports
        gc.collect()
        rss = psutil.Process().memory_info().rss / MIB
        traced, _ = tracemalloc.get_traced_memory()
        if self.frames:
            snapshot = tracemalloc.take_snapshot().filter_traces([
                tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<unknown>")])
            snapshot.dump(str(self.out / f"snapshot-{n}.tracemalloc"))
        types = Counter(type(o).__qualname__ for o in gc.get_objects())
        body = {"rss_mib": round(rss, 1), "traced_mib": round(traced / MIB, 1), "malloc_mib": mallinfo(),
                "pymalloc_mib": pymalloc(),
                "python_blocks": sys.getallocatedblocks(), "gc_objects": sum(types.values()),
                "top_types": types.most_common(25), "caches": bounded_caches(),
                "seconds": round(time.monotonic() - started, 2)}
        (self.out / f"report-{n}.json").write_text(json.dumps(body, indent=1))

    def trim(self, signum: int, frame: FrameType | None) -> None:
        self.trims += 1
        libc = _libc()
        before = psutil.Process().memory_info().rss / MIB
        started = time.perf_counter()
        released = libc.malloc_trim(0) if libc is not None else -1
        ms = (time.perf_counter() - started) * 1000
        after = psutil.Process().memory_info().rss / MIB
        (self.out / f"trim-{self.trims}.json").write_text(json.dumps(
            {"rss_before_mib": round(before, 1), "rss_after_mib": round(after, 1), "released": released,
             "ms": round(ms, 1), "malloc_mib_after": mallinfo(), "pymalloc_mib_after": pymalloc()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=6,
                        help="frames kept per traced allocation (0: no tracemalloc, the rest of the report)")
    args, daari_args = parser.parse_known_args()
    args.out.mkdir(parents=True, exist_ok=True)
    probe = Probe(args.out, args.frames)
    signal.signal(signal.SIGUSR1, probe.report)
    signal.signal(signal.SIGUSR2, probe.trim)
    sys.argv = ["daari", *daari_args]
    runpy.run_module("daari", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
