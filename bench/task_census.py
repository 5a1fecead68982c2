"""`python -m bench.task_census`: Trio's task steps, wake-ups and run-loop passes per served L0 hit, daari vs the
bare Hypercorn app, under the same wrk load.

Every task step the served process runs per hit is work the bare app may not do: a task resumed (its frames
re-entered), the run loop's pass around it, and the code and data it touches (the working set "The L0 hit on
Hypercorn: wall time" found to be the gap). This counts them. Each server runs under this module's `serve`
mode, which installs a `trio.abc.Instrument` (`Census`) in the served process's run and snapshots its counts to
a file on SIGUSR1; the driver warms each server, takes a snapshot, sends `--duration` seconds of wrk at
`--connections`, takes another, and prints per request, by task name: steps, wake-ups (`task_scheduled`), time
in steps, and spawns; and per request: run-loop passes (`before_io_wait`: one a pass), passes that waited in
epoll, tasks spawned and exited. The instrument itself costs time per step (two clock reads): its times compare
tasks within one process, its counts are exact.

    python -m bench.task_census                     # daari (this tree) and the bare app, 5 s of wrk each
    python -m bench.task_census main --rounds 2     # also daari at REV, the servers taking turns
    python -m bench.task_census --variant 'no log={"log": {"decisions": false}}'
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import trio

SNAPSHOT_ENV = "DAARI_TASK_CENSUS"  # where the served process writes its snapshot on SIGUSR1


class Census(trio.abc.Instrument):
    """Counts per task name: steps, wake-ups, time in steps, spawns; per run: loop passes, epoll waits."""

    def __init__(self) -> None:
        self.steps: dict[str, int] = defaultdict(int)
        self.scheduled: dict[str, int] = defaultdict(int)
        self.step_s: dict[str, float] = defaultdict(float)
        self.spawned: dict[str, int] = defaultdict(int)
        self.passes = 0
        self.waited = 0  # passes whose epoll wait had a timeout (nothing was runnable)
        self.exited = 0
        self._started = 0.0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        name = task.name
        self.step_s[name] += time.perf_counter() - self._started
        self.steps[name] += 1

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        self.scheduled[task.name] += 1

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned[task.name] += 1

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.exited += 1

    def before_io_wait(self, timeout: float) -> None:
        self.passes += 1
        if timeout > 0:
            self.waited += 1

    def snapshot(self) -> dict[str, Any]:
        return {"steps": dict(self.steps), "scheduled": dict(self.scheduled), "step_s": dict(self.step_s),
                "spawned": dict(self.spawned), "passes": self.passes, "waited": self.waited,
                "exited": self.exited}


def serve(argv: list[str]) -> None:
    """Run `python -m MODULE ARGS...` (daari's CLI or bench.bare_app) with a Census in its trio.run."""
    census = Census()
    path = Path(os.environ[SNAPSHOT_ENV])

    def write(signum: int, frame: Any) -> None:  # runs in the main thread between bytecodes
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(census.snapshot()))
        tmp.replace(path)

    signal.signal(signal.SIGUSR1, write)
    real_run = trio.run

    def run(*args: Any, **kwargs: Any) -> Any:  # the served module's one trio.run gets the instrument
        return real_run(*args, instruments=[census, *kwargs.pop("instruments", ())], **kwargs)

    trio.run = run  # type: ignore[assignment]
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        sys.path.pop(0)  # run as a script: bench/'s modules (load, memory, tools...) must not shadow others
    if argv[0] == "-m":
        argv = argv[1:]
    module, *rest = argv
    sys.argv = [module, *rest]
    import runpy
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def _snapshot(pid: int, path: Path) -> dict[str, Any]:
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} wrote no census snapshot")
        time.sleep(0.02)
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _diff(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in after.items():
        if isinstance(value, dict):
            out[key] = {k: v - before[key].get(k, 0) for k, v in value.items() if v - before[key].get(k, 0)}
        else:
            out[key] = value - before[key]
    return out


def _launcher(*module: str) -> list[str]:
    """This file run as a script (not `-m bench.task_census`): a daari served from another tree (`tree=`, its
    own PYTHONPATH) has no bench.task_census, and the script needs only the standard library and Trio."""
    from bench.servers import PYTHON
    return [PYTHON, str(Path(__file__).resolve()), "serve", *module]


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _daari_with(daari: Callable[..., contextlib.AbstractContextManager[Any]], config: dict[str, Any], tmp: Path,
                launcher: list[str]) -> contextlib.AbstractContextManager[Any]:
    return daari(config, tmp, launcher=launcher)


def run(rev: str | None, duration_s: float, rounds: int, connections: int,
        variants: dict[str, dict[str, Any]], top: int) -> list[Any]:
    from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config, warm_hit
    from bench.load import measure
    from bench.report import Table
    from bench.served_instructions import bare_under, merged
    from bench.servers import Server, daari, dumps, fake_upstream, workdir
    from bench.versus import exported

    body = dumps(REQUEST)
    census: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, \
            (exported(rev) if rev else contextlib.nullcontext(None)) as old_tree, contextlib.ExitStack() as stack:
        servers: dict[str, tuple[Server, Path]] = {}

        def start(label: str, opener: Callable[[list[str]], contextlib.AbstractContextManager[Server]],
                  *module: str) -> Server:
            path = tmp / f"census-{len(servers)}.json"
            with _env(SNAPSHOT_ENV, str(path)):
                server = stack.enter_context(opener(_launcher(*module)))
            servers[label] = (server, path)
            return server

        base = proxy_config(upstream.url)
        first = start("daari L0 hit (this tree)", lambda launcher: daari(base, tmp, launcher=launcher), "daari")
        hit_body, hit_headers = warm_hit(first)
        if old_tree is not None:
            warm_hit(start(f"daari L0 hit ({rev})",
                           lambda launcher: daari(base, tmp, launcher=launcher, tree=Path(old_tree)), "daari"))
        for label, overlay in variants.items():
            config = merged(base, overlay)
            warm_hit(start(f"daari L0 hit ({label})", partial(_daari_with, daari, config, tmp), "daari"))
        start("bare Hypercorn app", lambda launcher: bare_under(launcher, hit_body, hit_headers, tmp))
        for server, _ in servers.values():
            measure(server, PATH, body, HEADERS, connections=connections, duration_s=1.0)
        names = list(servers)
        for turn in range(rounds):
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                server, path = servers[name]
                before = _snapshot(server.process.pid, path)
                measured = measure(server, PATH, body, HEADERS, connections=connections, duration_s=duration_s)
                time.sleep(0.2)  # what a hit deferred (a batch, a flush) lands inside the count
                after = _snapshot(server.process.pid, path)
                census.setdefault(name, []).append((measured.load.requests, _diff(after, before)))
    return _tables(census, connections, duration_s, rounds, top, Table)


def _tables(census: dict[str, list[tuple[int, dict[str, Any]]]], connections: int, duration_s: float,
            rounds: int, top: int, table_cls: Any) -> list[Any]:
    summary = table_cls(f"Trio's run per served request at {connections} connections ({rounds} turn(s) of "
                        f"{duration_s:g} s of wrk; medians over turns)",
                        ["server", "requests", "task steps/req", "wake-ups/req", "loop passes/req",
                         "epoll waits/req", "spawned/req", "us in steps/req"])
    tables = [summary]
    for name, turns in census.items():
        def per(fn: Callable[[dict[str, Any]], float], turns: list[tuple[int, dict[str, Any]]] = turns) -> float:
            return statistics.median(fn(c) / n for n, c in turns)
        summary.add(name, sum(n for n, _ in turns), f"{per(lambda c: sum(c['steps'].values())):.2f}",
                    f"{per(lambda c: sum(c['scheduled'].values())):.2f}", f"{per(lambda c: c['passes']):.2f}",
                    f"{per(lambda c: c['waited']):.3f}", f"{per(lambda c: sum(c['spawned'].values())):.3f}",
                    f"{per(lambda c: sum(c['step_s'].values()) * 1e6):.1f}")
        by_task = table_cls(f"{name}: per request, by task (the {top} with most steps)",
                            ["task", "steps/req", "wake-ups/req", "us/req in its steps", "us/step", "spawned/req"])
        requests = sum(n for n, _ in turns)
        steps: dict[str, int] = defaultdict(int)
        woken: dict[str, int] = defaultdict(int)
        spent: dict[str, float] = defaultdict(float)
        spawned: dict[str, int] = defaultdict(int)
        for _, c in turns:
            for k, v in c["steps"].items():
                steps[k] += v
            for k, v in c["scheduled"].items():
                woken[k] += v
            for k, v in c["step_s"].items():
                spent[k] += v
            for k, v in c["spawned"].items():
                spawned[k] += v
        for task in sorted(set(steps) | set(spawned), key=lambda t: -steps.get(t, 0))[:top]:
            n = steps.get(task, 0)
            by_task.add(task, f"{n / requests:.4f}", f"{woken.get(task, 0) / requests:.4f}",
                        f"{spent.get(task, 0) * 1e6 / requests:.2f}", f"{spent.get(task, 0) * 1e6 / n:.1f}" if n
                        else "", f"{spawned.get(task, 0) / requests:.4f}")
        tables.append(by_task)
    summary.notes.append("counted by a trio.abc.Instrument in each served process (bench/task_census.py); a loop "
                         "pass is one before_io_wait; an epoll wait is a pass with a timeout (nothing runnable); "
                         "time in steps includes the instrument's own clock reads")
    return tables


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(sys.argv[2:])
        return
    from bench.report import print_tables
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", nargs="?", help="also count daari at this git revision")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of wrk per turn")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--top", type=int, default=25, help="tasks shown per server")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=JSON",
                        help="also count this tree with JSON config sections merged in")
    args = parser.parse_args()
    variants = {name: json.loads(text) for name, _, text in (v.partition("=") for v in args.variant)}
    print_tables(run(args.rev, args.duration, args.rounds, args.connections, variants, args.top))


if __name__ == "__main__":
    main()
