"""`python -m bench.passthrough_wall`: where a small pass-through's added wall time goes, at one connection.

The issue-23 pass-through (`X-Daari-No-Cache: true`, tests/fakes' OpenAI upstream, model "good") sent one request at
a time over one kept-alive socket, directly to the fake and through daari, in alternating blocks; for each daari
(this tree and `--tree` checkouts, on `--front-end` hypercorn and/or h11) it reports:

- the added wall time: p50 and p99 of daari's latency minus the direct call's, blocks taking turns in one run;
- per request, load-independent: daari's context switches (every thread of the process and of its children, from
  /proc: a thread that switches wakes), and with `--strace` its system calls by name (`strace -c -f`);
- with `--legs N`: N requests' wall-clock legs from `perf trace` (tracepoints, no ptrace stops; it still slows every
  call a little): the client's send, daari's read of the request, its send upstream, the upstream's read and its last
  write, daari's answer, the client's read (medians, us; this tree's daari only).

Needs `strace` for `--strace` and `perf` for `--legs`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config
from bench.pyload import build_request, response_end
from bench.servers import Server, daari, dumps, fake_upstream, workdir


class Client:
    """One blocking keep-alive socket, one request at a time."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.sock = self._connect()
        self.request = build_request(url + PATH, dumps({**REQUEST, "model": "good"}), headers)

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def one(self) -> float:
        started = time.perf_counter()
        self.sock.sendall(self.request)
        buf = bytearray()
        while True:
            data = self.sock.recv(65536)
            if not data:  # Hypercorn closes a connection after 1,000 requests (keep_alive_max_requests)
                self.sock.close()
                self.sock = self._connect()
                return self.one()
            buf += data
            end = response_end(buf)
            if end is not None:
                break
        took = time.perf_counter() - started
        if end[1] != 200 or end[0] != len(buf):
            raise RuntimeError(f"unexpected answer: {bytes(buf[:300])!r}")
        if end[2]:
            self.sock.close()
            self.sock = self._connect()
        return took

    def close(self) -> None:
        self.sock.close()


def threads_switches(pid: int) -> dict[str, int]:
    """Context switches (voluntary + not) by thread, over the process and its children ("pid/tid name")."""
    out: dict[str, int] = {}
    pids = [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    for p in pids:
        for task in Path(f"/proc/{p}/task").iterdir():
            with contextlib.suppress(OSError):
                status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
                              if ":\t" in line)
                key = f"{p}/{task.name} {status['Name'].strip()}"
                out[key] = int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
    return out


_STRACE_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


@contextlib.contextmanager
def strace_counts(pid: int, out: Path) -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()
    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(pid)], stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        yield counts
    finally:
        time.sleep(0.3)
        tracer.terminate()
        tracer.wait()
        for line in out.read_text().splitlines():
            m = _STRACE_ROW.match(line)
            if m and m[2] != "total":
                counts[m[2]] += int(m[1])


_PERF_CALL = re.compile(r"\s*([\d.]+) \(\s*([\d.]+) ms\): \S+?/(\d+) (?:(\w+)\(fd: \d+[^)]*\)|\s*\.\.\. "
                        r"\[continued\]: (\w+)\(\)\))\s+= (-?\d+)")
LEGS = ("client sent -> daari read the request", "daari: request read -> its upstream send",
        "-> the upstream read the request", "the upstream: read -> its last write",
        "the upstream's last write -> daari's answer written", "-> the client read the answer")


def perf_legs(client: Client, n: int, pids: dict[str, int], out: Path) -> list[list[float]]:
    """Each request's legs (us) from `perf trace` of recvfrom/sendto in the client (this process), daari and the
    upstream; times are each call's return."""
    tracer = subprocess.Popen(["perf", "trace", "-e", "recvfrom,sendto", "-p",
                               ",".join(str(pid) for pid in (os.getpid(), pids["daari"], pids["upstream"])),
                               "-o", str(out)], stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    block(client, n)
    time.sleep(0.3)
    tracer.send_signal(2)
    tracer.wait()
    calls = []  # (returned at ms, pid, call, ok)
    for line in out.read_text().splitlines():
        m = _PERF_CALL.match(line)
        if m:
            calls.append((float(m[1]) + float(m[2]), int(m[3]), m[4] or m[5], not m[6].startswith("-")))
    calls.sort()
    me, proxy, upstream = os.getpid(), pids["daari"], pids["upstream"]

    def after(start: int, pid: int, call: str) -> int:
        return next(k for k in range(start + 1, len(calls)) if calls[k][1] == pid and calls[k][2] == call
                    and (call == "sendto" or calls[k][3]))

    rows: list[list[float]] = []
    i = -1
    while True:
        try:
            sent = after(i, me, "sendto")
            read = after(sent, proxy, "recvfrom")
            forwarded = after(read, proxy, "sendto")
            arrived = after(forwarded, upstream, "recvfrom")
            answered = after(arrived, proxy, "sendto")
            last_write = max(k for k in range(arrived, answered) if calls[k][1] == upstream and calls[k][2] == "sendto")
            got = after(answered, me, "recvfrom")
        except (StopIteration, ValueError):
            return rows
        i = got
        marks = (sent, read, forwarded, arrived, last_write, answered, got)
        rows.append([(calls[b][0] - calls[a][0]) * 1000 for a, b in zip(marks, marks[1:], strict=False)])


def block(client: Client, n: int) -> list[float]:
    return [client.one() for _ in range(n)]


def run(trees: list[tuple[str, Path | None]], front_ends: list[str], rounds: int, per_block: int,
        strace_n: int, content_length: bool = False, legs_n: int = 0) -> None:
    no_cache = {**HEADERS, "X-Daari-No-Cache": "true"}
    with workdir() as tmp, fake_upstream("openai", tmp, content_length=content_length) as upstream, \
            contextlib.ExitStack() as stack:
        proxies: dict[str, Server] = {}
        for label, tree in trees:
            for front in front_ends:
                config: dict[str, Any] = proxy_config(upstream.url)
                config["server"] = {**config["server"], "front_end": front}
                proxies[f"{label} {front}"] = stack.enter_context(daari(config, tmp, tree=tree))
        direct = Client(upstream.url, HEADERS)
        clients = {name: Client(p.url, no_cache) for name, p in proxies.items()}
        for client in (direct, *clients.values()):
            block(client, 200)  # warm-up: imports, pools, caches
        lat: dict[str, list[float]] = {name: [] for name in clients}
        base: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(rounds):
            for name, client in clients.items():
                base[name] += block(direct, per_block)
                lat[name] += block(client, per_block)
        print(f"rounds {rounds} x {per_block} requests; load average {os.getloadavg()}")
        for name in clients:
            d50, d99 = statistics.median(base[name]) * 1e3, statistics.quantiles(base[name], n=100)[98] * 1e3
            p50, p99 = statistics.median(lat[name]) * 1e3, statistics.quantiles(lat[name], n=100)[98] * 1e3
            print(f"{name:24} direct p50 {d50:.3f} p99 {d99:.3f} | daari p50 {p50:.3f} p99 {p99:.3f} | "
                  f"added p50 {p50 - d50:+.3f} p99 {p99 - d99:+.3f} ms")
        n = 500
        for name, client in clients.items():
            pid = proxies[name].process.pid
            before, cpu_before, wall_before = threads_switches(pid), proxies[name].cpu_seconds(), time.perf_counter()
            times_before = proxies[name].ps.cpu_times()
            block(client, n)
            after, cpu_after, wall_after = threads_switches(pid), proxies[name].cpu_seconds(), time.perf_counter()
            times_after = proxies[name].ps.cpu_times()
            per = {k: (after[k] - before.get(k, 0)) / n for k in after}
            print(f"{name}: CPU {(cpu_after - cpu_before) / n * 1e6:.0f} us per request (main process: user "
                  f"{(times_after.user - times_before.user) / n * 1e6:.0f}, system "
                  f"{(times_after.system - times_before.system) / n * 1e6:.0f}; wall "
                  f"{(wall_after - wall_before) / n * 1e6:.0f} us); context switches per request "
                  f"{sum(per.values()):.2f}: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.01))
        upstream_before, cpu_before, wall_before = (threads_switches(upstream.process.pid), upstream.cpu_seconds(),
                                                    time.perf_counter())
        block(direct, n)
        up = sum(threads_switches(upstream.process.pid).values()) - sum(upstream_before.values())
        print(f"direct: the upstream's CPU {(upstream.cpu_seconds() - cpu_before) / n * 1e6:.0f} us per request "
              f"(wall {(time.perf_counter() - wall_before) / n * 1e6:.0f} us); context switches per request "
              f"{up / n:.2f}")
        if strace_n:
            for name, client in clients.items():
                with strace_counts(proxies[name].process.pid, tmp / "strace.txt") as counts:
                    block(client, strace_n)
                total = sum(counts.values())
                print(f"{name}: syscalls per request {total / strace_n:.2f}: "
                      + ", ".join(f"{k} {v / strace_n:.2f}" for k, v in counts.most_common()))
            with strace_counts(upstream.process.pid, tmp / "strace.txt") as counts:
                block(direct, strace_n)
            print(f"direct: the upstream's syscalls per request {sum(counts.values()) / strace_n:.2f}: "
                  + ", ".join(f"{k} {v / strace_n:.2f}" for k, v in counts.most_common()))
        for name, client in clients.items():
            if legs_n and name.startswith("this "):
                rows = perf_legs(client, legs_n, {"daari": proxies[name].process.pid,
                                                  "upstream": upstream.process.pid}, tmp / "perf.txt")
                columns = zip(*rows, strict=True)
                print(f"{name}: legs of {len(rows)} requests (perf trace), median us: " + "; ".join(
                    f"{leg} {statistics.median(column):.0f}" for leg, column in zip(LEGS, columns, strict=True))
                      + f"; total {statistics.median(sum(row) for row in rows):.0f}")
        for client in (direct, *clients.values()):
            client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path, default=[],
                        help="also serve daari from this checkout (a `git archive` of a commit); repeatable")
    parser.add_argument("--front-end", action="append", choices=("hypercorn", "h11"),
                        help="front ends to measure (default both)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-block", type=int, default=100)
    parser.add_argument("--strace", type=int, default=0, metavar="N", help="count daari's syscalls over N requests")
    parser.add_argument("--content-length", action="store_true",
                        help="the fake answers with a Content-Length (two writes) instead of chunked (three)")
    parser.add_argument("--legs", type=int, default=0, metavar="N",
                        help="wall-clock legs of N requests through this tree's daari (perf trace)")
    parser.add_argument("--no-self", action="store_true", help="only the --tree checkouts, not this tree")
    args = parser.parse_args()
    trees: list[tuple[str, Path | None]] = [] if args.no_self else [("this", None)]
    trees += [(tree.name, tree) for tree in args.tree]
    run(trees, args.front_end or ["h11", "hypercorn"], args.rounds, args.per_block, args.strace, args.content_length,
        args.legs)


if __name__ == "__main__":
    main()
