"""`python -m bench.task_steps`: every Trio task step and run-loop pass in daari between a streamed request's bytes
read and its first content delta written, on the Hypercorn and h11 front ends.

daari runs as `bench.task_steps_server` (daari's own `run_server` under a `trio.abc.Instrument`, its socket calls
stamped; see there). One streamed pass-through at a time (`X-Daari-No-Cache: true`, the fake OpenAI upstream's
"long" model, as `bench.ttft_timeline` sends them), on a new connection each and on one kept-alive connection.
For each front end and connection kind, per request, from daari's `accept()` of a new connection (or its
`recv()` of the request on a kept-alive one) to its `send()` of the first content delta (the window), in phases:
accepted -> request read -> daari's app called -> upstream request sent -> the upstream's first delta read ->
that delta written to the client. Per phase (medians over the requests):

- its time and its run-loop passes (I/O waits: each an `epoll_wait` and a batch of runnable tasks),
- per task name: the steps in the phase and their time (a step cut by a phase edge counts in both),
- and the passes between the response head's `send()` and the first delta's `send()` (Hypercorn writes them apart);
- `--steps`: every window, step by step (start in us after the request's read, length, task), with the socket
  calls, spawns, exits and the app's call.

    python -m bench.task_steps --requests 16                # both front ends, 16 requests per connection kind
    python -m bench.task_steps --front-end hypercorn --steps --requests 2
    python -m bench.task_steps --tree /tmp/base             # daari from another checkout (this bench's server)
    python -m bench.task_steps --pace 0.002 --words 20      # paced deltas: the first comes alone, as a model's

Stamps are `time.perf_counter()` (CLOCK_MONOTONIC: the same clock in the client and in daari). The instrument's
own calls are in every figure (~1 us each, a few hundred per request): compare front ends and trees, do not read
the absolute times as daari's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
import yaml

from bench.servers import HOST, PYTHON, ROOT, Server, _spawn, _wait_http, fake_upstream, free_port, stop, workdir
from bench.stream_relay import NO_CACHE, WORD, daari_config, request_of, tier_of


@contextmanager
def instrumented(config: dict[str, Any], log_dir: Path, out: Path, tree: Path | None) -> Iterator[Server]:
    port = free_port()
    config_path = log_dir / f"daari-{port}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    # This tree's server script, run by path (another tree's `bench` package need not have it), daari from `tree`.
    env = {"DAARI_LOG_LEVEL": "WARNING", "PYTHONPATH": str(tree or ROOT)}
    script = f"import runpy; runpy.run_path({str(ROOT / 'bench' / 'task_steps_server.py')!r}, run_name='__main__')"
    process, log_path = _spawn(f"daari-{port}", [
        PYTHON, "-c", script, "--config", str(config_path), "--port", str(port),
        "--data-dir", str(log_dir / f"data-{port}"), "--out", str(out)], log_dir, None, env=env, cwd=tree or ROOT)
    server = Server("daari", f"http://{HOST}:{port}", process, log_path)
    try:
        _wait_http(server, "/healthz", 120)
        yield server
    finally:
        stop(server, 30)


class Client:
    """One HTTP/1.1 connection; `post` sends a request and reads its chunked answer to the end."""

    def __init__(self, port: int, keep: bool) -> None:
        self.port, self.keep = port, keep
        self.sock: trio.SocketStream | None = None

    async def post(self, route: str, body: bytes, headers: dict[str, str]) -> tuple[float, float]:
        """(request sent, first content delta read), perf_counter stamps."""
        if self.sock is None:
            self.sock = await trio.open_tcp_stream(HOST, self.port)
        head = (f"POST {route} HTTP/1.1\r\nhost: {HOST}:{self.port}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n" + ("" if self.keep else "connection: close\r\n")
                + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()
        await self.sock.send_all(head + body)
        sent, first, seen = time.perf_counter(), 0.0, b""
        while True:
            data = await self.sock.receive_some(65536)
            if not data:
                raise RuntimeError("the server closed the connection mid-answer")
            if not first and WORD in seen[-8:] + data:
                first = time.perf_counter()
            seen = (seen + data)[-16:]
            if seen.endswith(b"\r\n0\r\n\r\n"):
                break
        if not self.keep:
            await self.sock.aclose()
            self.sock = None
        return sent, first

    async def aclose(self) -> None:
        if self.sock is not None:
            await self.sock.aclose()


PHASES = ("front end: connection accepted -> request read (a new connection)",
          "front end: request read -> daari's app called", "daari: app called -> request sent upstream",
          "upstream: request sent -> first delta read", "relay: first delta read -> written to the client")


@dataclass
class Window:
    """One request's notes from the start of the step that read it to its first content delta's write, and the
    phase edges: request read, app called, upstream request sent, upstream's first delta read, delta written."""

    kind: str
    ttft_ms: float  # the client's: request sent -> first delta read
    notes: list[list[Any]]
    edges: tuple[float, ...]  # accepted (or the request read, on a kept-alive connection), then as above
    head_at: float | None  # the response head's send(), when apart from the delta's


def short(name: str) -> str:
    parts = name.replace("<locals>.", "").split(".")
    return ".".join(parts[-2:])


def windows(notes: list[list[Any]], requests: list[tuple[str, str, float, float]]) -> list[Window]:
    """Each request's window: found by its salt in the `recv()` that read it, ended by the first `send()` of a
    delta's word on the same descriptor."""
    out = []
    for kind, salt, sent, first in requests:
        i = next(i for i, n in enumerate(notes) if n[1] == "recv" and n[3] > 0 and salt in n[4])
        fd = notes[i][2]
        j = next(j for j in range(i, len(notes))
                 if notes[j][1] == "send" and notes[j][2] == fd and "word" in notes[j][4])
        called = next(n[0] for n in notes[i:j] if n[1] == "app")
        up_at, up_fd = next((n[0], n[2]) for n in notes[i:j]
                            if n[1] == "send" and n[2] != fd and n[4].startswith("POST"))
        word_in = next(n[0] for n in notes[i:j] if n[1] == "recv" and n[2] == up_fd and n[3] > 0 and "word" in n[4])
        head_at = next((n[0] for n in notes[i:j] if n[1] == "send" and n[2] == fd and n[4].startswith("HTTP/1.1")),
                       None)
        accepted = next((a for a in range(i, -1, -1) if notes[a][1] == "accept" and notes[a][3] == fd), None)
        if kind != "new connection":
            accepted = None  # the connection was accepted requests ago
        k = i if accepted is None else accepted  # the window starts with the step that accepted or read
        while k > 0 and notes[k][1] != "step":
            k -= 1
        edges = (notes[i if accepted is None else accepted][0], notes[i][0], called, up_at, word_in, notes[j][0])
        out.append(Window(kind, (first - sent) * 1000, notes[k:j + 1], edges, head_at))
    return out


def show(window: Window) -> None:
    t0 = window.edges[1]  # the request read
    open_steps: dict[int, float] = {}
    for n in window.notes:
        at = (n[0] - t0) * 1e6
        if n[1] == "step":
            open_steps[n[2]] = n[0]
        elif n[1] == "done":
            began = open_steps.pop(n[2], None)
            if began is not None:
                print(f"    {(began - t0) * 1e6:8.1f}  step {(n[0] - began) * 1e6:7.1f} us  {short(n[3])}")
        elif n[1] == "woke":
            print(f"    {at:8.1f}  ---- run-loop pass (I/O wait, timeout {n[2]:.3g})")
        elif n[1] in ("send", "recv"):
            print(f"    {at:8.1f}    {n[1]}(fd {n[2]}) = {n[3]}  {n[4][:60]!r}"
                  + (f"  (the call took {n[5] * 1e6:.0f} us)" if n[5] > 50e-6 else ""))
        elif n[1] in ("spawn", "exit"):
            print(f"    {at:8.1f}    {n[1]} {short(n[3])}")
        elif n[1] == "app":
            print(f"    {at:8.1f}    daari's app called")
        elif n[1] == "accept" and n[3] >= 0:
            print(f"    {at:8.1f}    accept(fd {n[2]}) = fd {n[3]}")


def phase_of(window: Window, at: float) -> int | None:
    edges = window.edges
    for phase in range(len(PHASES)):
        if edges[phase] <= at < edges[phase + 1]:
            return phase
    return None


def tally(window: Window) -> tuple[list[Counter[str]], list[dict[str, float]], list[int]]:
    """Per phase: steps by task, step time by task (the part of each step inside the phase; the step that writes
    the delta counted up to its `send()`), run-loop passes."""
    steps: list[Counter[str]] = [Counter() for _ in PHASES]
    spent: list[dict[str, float]] = [defaultdict(float) for _ in PHASES]
    passes = [0] * len(PHASES)
    edges = window.edges
    open_steps: dict[int, tuple[float, str]] = {}

    def count(began: float, ended: float, name: str) -> None:
        for phase in range(len(PHASES)):
            lo, hi = max(began, edges[phase]), min(ended, edges[phase + 1])
            if hi > lo:
                spent[phase][name] += hi - lo
                steps[phase][name] += 1

    for n in window.notes:
        if n[1] == "step":
            open_steps[n[2]] = (n[0], short(n[3]))
        elif n[1] == "done" and n[2] in open_steps:
            began, name = open_steps.pop(n[2])
            count(began, n[0], name)
        elif n[1] == "woke":
            phase = phase_of(window, n[0])
            if phase is not None:
                passes[phase] += 1
    for began, name in open_steps.values():
        count(began, edges[-1], name)
    return steps, spent, passes


def summarise(label: str, group: list[Window]) -> None:
    med = statistics.median
    print(f"\n== {label}: medians of {len(group)}; client TTFT {med(w.ttft_ms for w in group):.3f} ms")
    tallies = [tally(w) for w in group]
    for phase, title in enumerate(PHASES):
        took = med((w.edges[phase + 1] - w.edges[phase]) * 1e6 for w in group)
        passes = med(t[2][phase] for t in tallies)
        print(f"  {title}: {took:.0f} us, {passes:.0f} run-loop passes")
        if phase == 3:
            continue  # the upstream's own time: daari waits (other steps here are off the critical path)
        names = sorted({name for t in tallies for name in t[1][phase]})
        for name in sorted(names, key=lambda k: -med(t[1][phase].get(k, 0.0) for t in tallies)):
            count = med(t[0][phase][name] for t in tallies)
            took = med(t[1][phase].get(name, 0.0) for t in tallies) * 1e6
            print(f"      {count:3.0f} steps {took:7.1f} us  {name}")
    heads = [(w.edges[-1] - w.head_at) * 1e6 for w in group if w.head_at is not None]
    if heads:
        between = [sum(1 for n in w.notes if n[1] == "woke" and w.head_at < n[0] < w.edges[-1])
                   for w in group if w.head_at is not None]
        print(f"  the response head's send() -> the delta's send(): {med(heads):.0f} us, {med(between):.0f} passes")
    else:
        print("  the response head went in the delta's send()")


def run(front_end: str | None, tree: Path | None, requests: int, words: int, pace: float) -> list[Window]:
    with workdir() as tmp, ExitStack() as stack:
        fake = stack.enter_context(fake_upstream("openai", tmp, token_delay_s=pace))
        out = tmp / "notes.jsonl"
        config = daari_config(tier_of(fake, "openai"), front_end=front_end)
        asked: list[tuple[str, str, float, float]] = []
        with instrumented(config, tmp, out, tree) as proxy:
            port = int(proxy.url.rsplit(":", 1)[1])

            async def drive() -> None:
                kept = Client(port, keep=True)
                for salt in range(6):  # warm-up: imports, the upstream pool, both connection kinds
                    for client in (kept, Client(port, keep=False)):
                        route, body, headers = request_of("openai", 10, salt)
                        await client.post(route, body, {**headers, **NO_CACHE})
                for salt in range(1000, 1000 + requests):
                    for kind, client in (("kept-alive", kept), ("new connection", Client(port, keep=False))):
                        route, body, headers = request_of("openai", words, salt + (0 if kind == "kept-alive" else 500))
                        sent, first = await client.post(route, body, {**headers, **NO_CACHE})
                        asked.append((kind, f"({salt + (0 if kind == 'kept-alive' else 500)})", sent, first))
                        await trio.sleep(0.2)
                await kept.aclose()

            trio.run(drive)
        notes = [json.loads(line) for line in out.read_text().splitlines()]
    return windows(notes, asked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--front-end", choices=("hypercorn", "h11", "both"), default="both")
    parser.add_argument("--requests", type=int, default=8, help="per connection kind")
    parser.add_argument("--words", type=int, default=100)
    parser.add_argument("--steps", action="store_true", help="print every request's window, step by step")
    parser.add_argument("--tree", type=Path, help="serve daari from another checkout")
    parser.add_argument("--pace", type=float, default=0.0, help="the fake waits this long before each delta (a "
                        "model generating: the first delta then comes in a read of its own)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; daari from {args.tree or ROOT}")
    for front_end in (("hypercorn", "h11") if args.front_end == "both" else (args.front_end,)):
        found = run(None if front_end == "hypercorn" else front_end, args.tree, args.requests, args.words,
                    args.pace)
        for kind in ("kept-alive", "new connection"):
            group = [w for w in found if w.kind == kind]
            if args.steps:
                for w in group:
                    print(f"\n-- {front_end}, {kind}: client TTFT {w.ttft_ms:.3f} ms")
                    show(w)
            summarise(f"{front_end}, {kind}", group)


if __name__ == "__main__":
    main()
