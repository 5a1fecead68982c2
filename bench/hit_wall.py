"""`python -m bench.hit_wall`: where a served L0 hit's wall time goes beside the main thread's instructions.

The servers of `bench.hit_ratio` (the bare Hypercorn app, daari from this tree, optionally variants), each under
wrk at 20 connections in turn; around each turn, from /proc: every thread's CPU (utime + stime) and context switches
(voluntary / involuntary) of the served process and its children, the whole machine's CPU, and the CPU of every
other process that ran. Per request: what each thread used, how often it was switched out. With `--strace`, one
more turn per server under `strace -c -f` (system calls per request; strace slows the server, so only the counts
mean anything); with `--perf DIR`, one more under `perf record -e cpu-clock` (`perf report -i DIR/NAME.data`).
`--variant NAME=JSON` adds daari with config merged in; `--bare-load model|daari|both|orjson|busy|spread` adds the bare
app in a heavier process or doing more per request (bench/bare_heavy.py): is it the process daari is, or its work?
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config, warm_hit
from bench.load import run_load
from bench.servers import Server, bare_app, daari, dumps, fake_upstream, workdir

TICK = os.sysconf("SC_CLK_TCK")


def _threads(pid: int) -> dict[str, tuple[float, float, int, int, int]]:
    """{"pid/tid comm": (user s, system s, voluntary switches, involuntary switches, minor faults)} per thread."""
    out: dict[str, tuple[float, float, int, int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        switches = {k: int(v) for k, _, v in (ln.partition(":\t") for ln in status.splitlines())
                    if k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")}
        out[f"{pid}/{tid} {comm}"] = (int(fields[11]) / TICK, int(fields[12]) / TICK,
                                      switches["voluntary_ctxt_switches"], switches["nonvoluntary_ctxt_switches"],
                                      int(fields[7]))
    return out


def _tree(server: Server) -> list[int]:
    return [server.process.pid, *(c.pid for c in server.ps.children(recursive=True))]


def _all_processes() -> dict[int, tuple[str, float]]:
    out: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(entry)] = (comm, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def _machine() -> tuple[float, float]:
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) / TICK, idle / TICK


def turn(server: Server, body: bytes, duration_s: float, connections: int) -> dict[str, Any]:
    pids = _tree(server)
    before = {k: v for pid in pids for k, v in _threads(pid).items()}
    procs_before, machine_before = _all_processes(), _machine()
    load = run_load(server.url + PATH, body, HEADERS, connections=connections, duration_s=duration_s)
    after = {k: v for pid in pids for k, v in _threads(pid).items()}
    procs_after, machine_after = _all_processes(), _machine()
    n = load.requests
    rows = []
    for key, now in sorted(after.items()):
        was = before.get(key, (0.0, 0.0, 0, 0, 0))
        delta = [a - b for a, b in zip(now, was, strict=True)]
        if any(delta):
            rows.append((key, 1e6 * delta[0] / n, 1e6 * delta[1] / n, delta[2] / n, delta[3] / n, delta[4] / n))
    others = sorted(((procs_after[p][1] - procs_before[p][1], procs_after[p][0], p)
                     for p in procs_after if p in procs_before and p not in pids
                     and procs_after[p][1] - procs_before[p][1] > 0), reverse=True)[:8]
    total, idle = machine_after[0] - machine_before[0], machine_after[1] - machine_before[1]
    return {"rps": load.rps, "requests": n, "p50_ms": load.p50_ms, "client_cpu_pct": load.client_cpu_pct,
            "threads": rows, "others": [(name, pid, round(cpu / load.duration_s * 100, 1)) for cpu, name, pid
                                        in others],
            "machine_busy_pct": round(100 * (1 - idle / total), 1) if total else 0.0}


def strace_turn(server: Server, body: bytes, duration_s: float, connections: int) -> tuple[int, str]:
    with tempfile.NamedTemporaryFile(suffix=".strace", delete=False) as out:
        path = out.name
    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", path, "-p", str(server.process.pid)],
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # strace attached before the load starts
        load = run_load(server.url + PATH, body, HEADERS, connections=connections, duration_s=duration_s)
    finally:
        tracer.send_signal(2)
        tracer.wait(10)
    text = Path(path).read_text()
    os.unlink(path)
    return load.requests, text


def perf_turn(server: Server, body: bytes, duration_s: float, connections: int, out: Path) -> int:
    """`perf record` (the cpu-clock software event: this VM has no hardware counters) on the server during a turn."""
    recorder = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "2000", "-g", "-o", str(out), "-p",
                                 str(server.process.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        load = run_load(server.url + PATH, body, HEADERS, connections=connections, duration_s=duration_s)
    finally:
        recorder.send_signal(2)
        recorder.wait(30)
    return load.requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--strace", action="store_true")
    parser.add_argument("--bare-load", action="append", default=[],
                        choices=("model", "daari", "both", "orjson", "busy", "spread"),
                        help="also serve the bare app in a process that loaded this first (bench/bare_heavy.py)")
    parser.add_argument("--perf", type=Path, metavar="DIR", help="also one turn per server under perf record")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=JSON")
    args = parser.parse_args()
    body = dumps(REQUEST)
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, contextlib.ExitStack() as stack:
        servers: dict[str, Server] = {"daari": stack.enter_context(daari(proxy_config(upstream.url), tmp))}
        hit_body, hit_headers = warm_hit(servers["daari"])
        for name, _, text in (v.partition("=") for v in args.variant):
            config = proxy_config(upstream.url)
            for section, values in json.loads(text).items():
                present = config.get(section)
                config[section] = {**(present if isinstance(present, dict) else {}), **values}
            servers[name] = stack.enter_context(daari(config, tmp))
            warm_hit(servers[name])
        servers["bare"] = stack.enter_context(bare_app(hit_body, hit_headers, tmp))
        for load in args.bare_load:
            os.environ["DAARI_BARE_LOAD"] = load
            servers[f"bare+{load}"] = stack.enter_context(bare_app(hit_body, hit_headers, tmp,
                                                                   module="bench.bare_heavy"))
        for server in servers.values():
            run_load(server.url + PATH, body, HEADERS, connections=args.connections, duration_s=2.0)
        for r in range(args.rounds):
            for name, server in servers.items():
                result = turn(server, body, args.duration, args.connections)
                print(f"== round {r} {name}: {result['rps']:.0f} req/s, p50 {result['p50_ms']:.2f} ms, "
                      f"client {result['client_cpu_pct']:.0f}%, machine busy {result['machine_busy_pct']}%")
                for key, user, system, vol, invol, faults in result["threads"]:
                    print(f"   {key:32s} user {user:6.1f} sys {system:6.1f} us/req  vol {vol:6.3f} "
                          f"invol {invol:6.3f} minflt {faults:6.3f} /req")
                print(f"   others (% of a core): {result['others']}")
        if args.perf:
            args.perf.mkdir(parents=True, exist_ok=True)
            for name, server in servers.items():
                n = perf_turn(server, body, args.duration, args.connections, args.perf / f"{name}.data")
                print(f"== perf {name}: {n} requests -> {args.perf / (name + '.data')}")
        if args.strace:
            for name, server in servers.items():
                n, text = strace_turn(server, body, args.duration, args.connections)
                print(f"== strace {name}: {n} requests")
                for line in text.splitlines():
                    parts = line.split()
                    if len(parts) >= 5 and parts[3].isdigit():
                        print(f"   {line}    -> {int(parts[3]) / n:.2f}/req")
                    else:
                        print(f"   {line}")


if __name__ == "__main__":
    main()
