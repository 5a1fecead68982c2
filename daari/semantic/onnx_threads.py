"""Where the embedding's onnxruntime threads run: a worker per physical core but the first, the caller on the first.

onnxruntime's default (`intra_op_num_threads` 0) is one thread per physical core, and it pins each of its own
workers to a core, leaving the rest to the thread that calls the session ("ort does not set affinity on the main
thread which is started and managed by the calling app"). daari's caller is a worker thread of Trio's and floats:
when the OS puts it on a pinned worker's core, the two take turns there (onnxruntime's caller spins while it waits
for its worker's share of each operator) and a run takes ~1.4x as long. It did so in most L1 lookups inside a
request (docs/performance.md, "The model run and the scheduler"). So the layout is made explicit: the workers on
cores 1..N-1, and the calling thread on core 0's CPUs for the length of a run (`caller_pinned`), its own affinity
put back after. The same vectors, bit for bit. One core, or a topology that cannot be read: onnxruntime's own
defaults, and the caller is left where it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TOPOLOGY = "/sys/devices/system/cpu/cpu{}/topology/{}"


@dataclass(frozen=True)
class ThreadLayout:
    threads: int  # intra_op_num_threads: the caller and a worker per further core (0: onnxruntime's default)
    worker_affinities: str | None  # session.intra_op_thread_affinities (1-based CPU ids); None: onnxruntime's own
    caller_cpus: frozenset[int] | None  # where the calling thread runs during a run; None: left where it is


DEFAULTS = ThreadLayout(0, None, None)  # onnxruntime's own count and placement; the caller left where it is


def _read_topology(cpu: int, field: str) -> str:
    return Path(TOPOLOGY.format(cpu, field)).read_text().strip()


def thread_layout(cpus: Iterable[int], read: Callable[[int, str], str] = _read_topology) -> ThreadLayout:
    """The layout over `cpus` (the logical CPUs this process may run on), grouped into physical cores."""
    logical = sorted(set(cpus))
    cores: dict[tuple[str, str], list[int]] = {}
    try:
        for cpu in logical:
            cores.setdefault((read(cpu, "physical_package_id"), read(cpu, "core_id")), []).append(cpu)
    except (OSError, ValueError):
        return DEFAULTS  # no topology (a container without /sys)
    groups = list(cores.values())  # in order of their first CPU
    if len(groups) < 2:
        return DEFAULTS  # one core: no worker to place
    # onnxruntime's ids are 1-based: "2" is CPU 1.
    workers = ";".join(",".join(str(cpu + 1) for cpu in group) for group in groups[1:])
    return ThreadLayout(len(groups), workers, frozenset(groups[0]))


@cache
def process_layout() -> ThreadLayout:
    """The layout for this process, from the CPUs it may run on when first asked (the session's creation)."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is None:  # not Linux
        return DEFAULTS
    return thread_layout(getaffinity(0))


@contextmanager
def caller_pinned(cpus: frozenset[int] | None) -> Iterator[None]:
    """The calling thread on `cpus` inside the block, its own affinity back after (None: left alone)."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    target = before & cpus
    if not target or target == before:  # already there, or kept elsewhere by its owner: not moved
        yield
        return
    os.sched_setaffinity(0, target)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
