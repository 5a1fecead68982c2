"""What Linux's scheduler did to a process's threads over a stretch of time: run-queue wait and preemptions.

Read from `/proc/<pid>/task/*/schedstat` (CPU ns, run-queue wait ns, time slices) and `status` (voluntary and
involuntary context switches), before and after. A thread that is running while it is read has its wait and
switch counts as of its last switch, so take the snapshots outside the stretch measured. Linux only: elsewhere
every snapshot is empty and every figure 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ThreadSched:
    cpu_ns: int
    wait_ns: int  # runnable but not running: waiting in a run queue for a CPU
    preempted: int  # involuntary context switches: taken off a CPU while it could still run
    cpu: int  # the CPU it last ran on


def snapshot(pid: int | None = None) -> dict[int, ThreadSched]:
    """Every thread of process `pid` (None: this one) by its native id (`threading.get_native_id`)."""
    tasks = f"/proc/{pid if pid is not None else 'self'}/task"
    found: dict[int, ThreadSched] = {}
    try:
        tids = os.listdir(tasks)
    except FileNotFoundError:
        return found
    for tid in tids:
        try:
            with open(f"{tasks}/{tid}/schedstat") as f:
                cpu_ns, wait_ns, _ = (int(v) for v in f.read().split())
            with open(f"{tasks}/{tid}/status") as f:
                preempted = next(int(line.split()[1]) for line in f if line.startswith("nonvoluntary_ctxt"))
            with open(f"{tasks}/{tid}/stat") as f:
                cpu = int(f.read().rsplit(")", 1)[1].split()[36])  # field 39, "processor"
        except (FileNotFoundError, ProcessLookupError, StopIteration, ValueError):
            continue  # the thread ended while it was read
        found[int(tid)] = ThreadSched(cpu_ns, wait_ns, preempted, cpu)
    return found


@dataclass(frozen=True)
class Stretch:
    """The scheduler's figures for the threads that ran during a stretch of time."""

    wait_ns: int  # summed over the threads that used CPU in it
    preempted: int  # of the thread that ran the stretch (`caller`), or of all threads without one
    threads: int  # how many threads used CPU in it
    one_cpu: bool  # whether they all last ran on the same CPU


def stretch(before: dict[int, ThreadSched], after: dict[int, ThreadSched], caller: int | None = None) -> Stretch:
    """What changed between two snapshots; `caller`: the native id of the thread that ran the stretch."""
    ran = [(before[tid], now) for tid, now in after.items() if tid in before and now.cpu_ns > before[tid].cpu_ns]
    if caller is None:
        preempted = sum(b.preempted - a.preempted for a, b in ran)
    else:
        was, now = before.get(caller), after.get(caller)
        preempted = now.preempted - was.preempted if was is not None and now is not None else 0
    return Stretch(wait_ns=sum(b.wait_ns - a.wait_ns for a, b in ran), preempted=preempted, threads=len(ran),
                   one_cpu=len({b.cpu for _, b in ran}) == 1)
