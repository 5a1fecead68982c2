"""`python -m bench.passthrough_cpu`: daari's own CPU per pass-through request (`X-Daari-No-Cache: true`), in one
process, the client side without sockets.

A real daari (actors, decision hub and its subscribers, the lean upstream client) runs in this process with one
OpenAI-compatible tier on tests/fakes' OpenAI upstream, which runs in its own process (bench.servers), so its
CPU is not counted; daari's ASGI app is called directly with the issue's small request, many times, and the
event loop thread's CPU time per call is printed (best of five runs, each followed by a pause so the hub's
subscribers handle what was published). What it counts: everything daari does for the request, the upstream
hop's socket calls included, without Hypercorn's front end (the same for every request, and the bare app's
cost). It moves with daari's code, not with the machine's load, so it compares commits on a busy machine.

    python -m bench.passthrough_cpu                 # whole answers (stream: false)
    python -m bench.passthrough_cpu --stream        # streamed answers: CPU per stream, and CPU to the first byte
    python -m bench.passthrough_cpu --profile 300   # cProfile of 300 requests: calls by package, top functions
    python -m bench.passthrough_cpu --instructions --calls 30   # instructions per request (callgrind; minutes)
    python -m bench.passthrough_cpu --steps         # CPU per request by pipeline step (the rest: route, subscribers)
    python -m bench.passthrough_cpu --legs          # CPU per request before the upstream send, after its answer...
    python -m bench.passthrough_cpu --stream --words 400   # a 400-delta stream (with --words 20: CPU per delta)
    python -m bench.passthrough_cpu --stream --words 60 --pace 0.02 --instructions --calls 3   # paced: one delta a
                                                    # read (the fake waits 20 ms before each; callgrind keeps up)
    python -m bench.passthrough_cpu --stream --anthropic ...   # an Anthropic client on an Anthropic tier
    python -m bench.passthrough_cpu --stream --words 3 --pace 0.003 --first-write   # the first delta's read to
                                                    # its write: CPU and wall per stream, medians
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from bench.servers import fake_upstream, workdir
from bench.step_timer import time_steps, timed
from tests.support import daari_server, make_config, upstream_tier

CALLGRIND_SLOWDOWN = 100  # at most this much slower under callgrind than at full speed (~50x measured)

REQUEST = {"model": "good", "temperature": 0, "messages": [
    {"role": "system", "content": "You are a helpful coding assistant."},
    {"role": "user", "content": "What does `git rebase -i HEAD~3` do?"}]}

ANTHROPIC_REQUEST = {"model": "good", "max_tokens": 256, "system": "You are a helpful coding assistant.",
                     "messages": [{"role": "user", "content": "What does `git rebase -i HEAD~3` do?"}]}


class Client:
    """Calls daari's ASGI app as Hypercorn does (the body already in a Trio memory channel) and keeps the CPU
    time at which the first body byte was sent."""

    def __init__(self, app: Any, host: str, body: bytes, anthropic: bool = False) -> None:
        self.app = app
        self.body = body
        self.anthropic = anthropic
        extra = [(b"anthropic-version", b"2023-06-01"), (b"x-api-key", b"bench")] if anthropic else []
        self.scope = {"type": "http", "method": "POST", "path": "/v1/messages" if anthropic else "/v1/chat/completions",
                      "query_string": b"",
                      "headers": [(b"host", host.encode()), (b"content-type", b"application/json"),
                                  (b"x-daari-no-cache", b"true"), (b"content-length", str(len(body)).encode()),
                                  *extra]}
        self.sent: list[dict[str, Any]] = []
        self.first_byte_cpu = 0.0

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body") and not self.first_byte_cpu:
            self.first_byte_cpu = time.thread_time()
        self.sent.append(message)

    async def call(self) -> None:
        to_app, receive = trio.open_memory_channel[dict[str, Any]](10)
        to_app.send_nowait({"type": "http.request", "body": self.body, "more_body": True})
        to_app.send_nowait({"type": "http.request", "body": b"", "more_body": False})
        self.sent.clear()
        self.first_byte_cpu = 0.0
        await self.app(dict(self.scope), receive.receive, self.send)
        to_app.send_nowait({"type": "http.disconnect"})  # as Hypercorn does once the response is complete

    def check(self) -> None:
        start = self.sent[0]
        body = b"".join(m.get("body", b"") for m in self.sent[1:])
        if start["status"] != 200 or (b"message_stop" if self.anthropic else b"daari_meta") not in body:
            raise RuntimeError(f"not a pass-through answer: {start} {body[:300]!r}")


async def by_step(client: Client, parts: Any, calls: int) -> None:
    """CPU per request by step, best of five runs of `calls` requests (each step's best run); inside the execute
    step, the judge and the tier's executor (the upstream call, in the request's task on a slot the ExecutorActor
    lends) apart."""
    spent: dict[str, float] = {}
    pipeline = parts.pipeline
    execute = next(step for step in pipeline.routed if step.name == "execute")
    execute.judge = timed("  execute: the judge", execute.judge, spent, time.thread_time)
    for executor in parts.executors.values():  # the ExecutorActor's own objects, run in the request's task
        executor.generate_leased = timed("  execute: the executor's generate (resilience, client, upstream call)",
                                         executor.generate_leased, spent, time.thread_time)  # a lent slot
    # The event loop thread's CPU: what runs during a step's await is that request's own work (the executor's
    # task during `execute`), with little else (the hub's subscribers catching up).
    time_steps(pipeline, spent, time.thread_time)
    best: dict[str, float] = {}
    for _ in range(5):
        spent.clear()
        start = time.thread_time()
        for _ in range(calls):
            await client.call()
            await trio.lowlevel.checkpoint()
        await trio.sleep(0.05)
        total = (time.thread_time() - start) / calls * 1e6
        run = {name: value / calls * 1e6 for name, value in spent.items()}
        run["(all)"] = total
        run["(outside the steps: route, record, subscribers)"] = total - sum(
            v for k, v in run.items() if k != "(all)" and not k.startswith(" "))
        for name, value in run.items():
            best[name] = min(best.get(name, value), value)
    print("daari CPU per pass-through request by pipeline step, us (each line's best of five runs):")
    for name, value in best.items():
        print(f"  {value:8.0f}  {name}")


async def by_leg(client: Client, calls: int) -> None:
    """The request's CPU on the event-loop thread by leg of its wall-clock path: before the upstream send (front end
    aside), the upstream's answer to the first body byte to the client, and after that byte until the app returns.
    At one connection the first two are on the answer's critical path; the third delays only the next request."""
    from daari.executors import lean_http

    marks: dict[str, float] = {}
    send, receive = lean_http.Connection.send, lean_http.Connection.receive

    async def marked_send(self: lean_http.Connection, data: bytes) -> None:
        marks.setdefault("sent", time.thread_time())
        await send(self, data)

    async def marked_receive(self: lean_http.Connection, *, wait: bool = False) -> bytes:
        data = await receive(self, wait=wait)
        marks["answered"] = time.thread_time()  # the last read of the answer before the body byte
        return data

    lean_http.Connection.send = marked_send  # type: ignore[method-assign]
    lean_http.Connection.receive = marked_receive  # type: ignore[method-assign]
    legs = ("before the upstream send", "the upstream's answer read -> first body byte to the client",
            "after the first body byte until the app returns", "(all)")
    best: dict[str, float] = {}
    try:
        for _ in range(5):
            spent = dict.fromkeys(legs, 0.0)
            for _ in range(calls):
                marks.clear()
                began = time.thread_time()
                await client.call()
                ended = time.thread_time()
                spent[legs[0]] += marks["sent"] - began
                spent[legs[1]] += client.first_byte_cpu - marks["answered"]
                spent[legs[2]] += ended - client.first_byte_cpu
                spent[legs[3]] += ended - began
                await trio.lowlevel.checkpoint()
            await trio.sleep(0.05)
            for name, value in spent.items():
                best[name] = min(best.get(name, 1e9), value / calls * 1e6)
    finally:
        lean_http.Connection.send, lean_http.Connection.receive = send, receive  # type: ignore[method-assign]
    print("daari CPU per pass-through request by leg of its path, us (each line's best of five runs):")
    for name, value in best.items():
        print(f"  {value:8.0f}  {name}")


async def by_first_write(client: Client, calls: int) -> None:
    """From the lean client's read that returned the first content delta (the fake's "word0") to the ASGI body
    message that carries it: what stands between the first token's arrival and its write, front end aside. With
    a paced fake the delta comes in a read of its own, as a model's do. Medians over `calls` streams."""
    from daari.executors import lean_http

    marks: dict[str, float] = {}
    receive, send = lean_http.Connection.receive, client.send

    async def marked(self: lean_http.Connection, *, wait: bool = False) -> bytes:
        data = await receive(self, wait=wait)
        if b"word0" in data and "read" not in marks:
            marks["read"], marks["read_wall"] = time.thread_time(), time.perf_counter()
        return data

    async def written(message: dict[str, Any]) -> None:
        if "read" in marks and "written" not in marks and b"word0" in message.get("body", b""):
            marks["written"], marks["written_wall"] = time.thread_time(), time.perf_counter()
        await send(message)

    lean_http.Connection.receive = marked  # type: ignore[method-assign]
    client.send = written  # type: ignore[method-assign]
    cpu, wall = [], []
    try:
        for _ in range(calls):
            marks.clear()
            await client.call()
            cpu.append((marks["written"] - marks["read"]) * 1e6)
            wall.append((marks["written_wall"] - marks["read_wall"]) * 1e6)
            await trio.sleep(0.005)  # subscribers run between streams
    finally:
        lean_http.Connection.receive = receive  # type: ignore[method-assign]
        client.send = send  # type: ignore[method-assign]
    print(f"the first delta's read -> its body message: CPU {statistics.median(cpu):.1f} us, wall "
          f"{statistics.median(wall):.1f} us (medians of {calls} streams)")


async def measure(upstream_url: str, stream: bool, calls: int, profile: int, save: str,
                  windowed: bool = False, steps: bool = False, words: int = 0, legs: bool = False,
                  anthropic: bool = False, first_write: bool = False) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="daari-ptcpu-"))
    model = "long" if words else "good"  # the fake's "long" answer: `max_tokens` words, one delta each
    tier = (upstream_tier("anthropic", upstream_url, model) if anthropic
            else upstream_tier("openai", upstream_url + "/v1", model))
    config = make_config(tmp, tiers={"L3": tier}, cache={"l1": {"enabled": False}})
    async with daari_server(config) as server:
        request = ANTHROPIC_REQUEST if anthropic else REQUEST
        body = {**request, "stream": stream, **({"model": model, "max_tokens": words} if words else {})}
        client = Client(server.parts.app, server.url.removeprefix("http://"), json.dumps(body).encode(), anthropic)
        for _ in range(20):
            await client.call()
        client.check()
        if steps:
            await by_step(client, server.parts, calls)
        elif legs:
            await by_leg(client, calls)
        elif first_write:
            await by_first_write(client, calls)
        elif profile:
            profiler = cProfile.Profile(time.thread_time)  # CPU, not the waits
            profiler.enable()
            for _ in range(profile):
                await client.call()
                await trio.lowlevel.checkpoint()
            await trio.sleep(0.05)
            profiler.disable()
            if save:
                profiler.dump_stats(save)
            report(pstats.Stats(profiler), profile)
        elif windowed:
            # Under callgrind every request runs ~50x slower than at full speed: the client watch's tick scaled by
            # more than that arms the requests it would arm at full speed (none of a few milliseconds), not all.
            watches = getattr(server.parts, "client_watches", None)
            if hasattr(watches, "tick_s"):
                watches.tick_s *= CALLGRIND_SLOWDOWN
            for _ in range(3):  # the parent dumps callgrind's counters around each window (the loop waits)
                print("ready", flush=True)
                sys.stdin.readline()
                for _ in range(calls):
                    await client.call()
                    await trio.lowlevel.checkpoint()
                await trio.sleep(0.05)
                print("done", flush=True)
                sys.stdin.readline()
        else:
            runs, firsts = [], []
            reads = _count_reads()
            for _ in range(5):
                start, first = time.thread_time(), 0.0
                for _ in range(calls):
                    began = time.thread_time()
                    await client.call()
                    first += client.first_byte_cpu - began
                    await trio.lowlevel.checkpoint()  # subscribers run between requests, as they would
                await trio.sleep(0.05)
                runs.append((time.thread_time() - start) / calls * 1e6)
                firsts.append(first / calls * 1e6)
            kind = "stream" if stream else "request"
            print(f"daari CPU per pass-through {kind}: {min(runs):,.0f} us "
                  f"(best of {', '.join(f'{r:,.0f}' for r in runs)})")
            print(f"  of which before the first body byte: {min(firsts):,.0f} us "
                  f"(best of {', '.join(f'{r:,.0f}' for r in firsts)})")
            print(f"  upstream reads per {kind}: {reads[0] / (5 * calls):,.1f} (the lean client's socket reads with "
                  "data, the response head's included)")
        server.shutdown.set()


def _count_reads() -> list[int]:
    """Counts the lean client's upstream reads that returned data from now on (in this benchmark's process only:
    each new upstream connection's socket counts its `recv` calls): how many events a read carries decides what a
    relayed delta costs. The socket, not `Connection.receive`: a streamed body's reads do not call that."""
    import socket

    from daari.executors import lean_http

    count = [0]

    class CountingSocket(socket.socket):
        __slots__ = ()

        def recv(self, size: int, flags: int = 0) -> bytes:
            data = super().recv(size, flags)
            count[0] += bool(data)
            return data

    init = lean_http.Connection.__init__

    def counted(self: lean_http.Connection, raw: socket.socket, sock: Any, origin: Any) -> None:
        raw.__class__ = CountingSocket  # the same object and layout, its recv counted
        init(self, raw, sock, origin)

    lean_http.Connection.__init__ = counted  # type: ignore[method-assign]
    for conn in gc.get_objects():  # the connections already made (the warm-up's, pooled)
        if isinstance(conn, lean_http.Connection) and type(conn.raw) is socket.socket:
            conn.raw.__class__ = CountingSocket
    return count


def package(path: str) -> str:
    if path == "~":
        return "builtins"
    if "site-packages/" in path:
        return path.split("site-packages/")[1].split("/")[0]
    for top in ("daari", "actors", "bench", "tests"):
        if f"/{top}/" in path:
            return top
    return "stdlib"


def report(stats: pstats.Stats, requests: int) -> None:
    raw = stats.stats  # type: ignore[attr-defined]
    calls: Counter[str] = Counter()
    for (path, _line, _name), (_cc, count, *_rest) in raw.items():
        calls[package(path)] += count / requests
    print(f"Python calls per request (cProfile counts a coroutine's every resume): {sum(calls.values()):,.0f}")
    for name, count in calls.most_common():
        if count >= 1:
            print(f"  {name}: {count:,.0f}")
    print("\nTop functions by own CPU time, us per request (cProfile's overhead included):")
    by_own = sorted(raw.items(), key=lambda item: -item[1][2])[:25]
    for (path, line, name), (_cc, count, own, _cumulative, _callers) in by_own:
        where = f"{package(path)} {Path(path).name}:{line}({name})"
        print(f"  {own / requests * 1e6:8.0f} {count / requests:6.1f}  {where}")
    print("\nTop functions of daari by cumulative CPU time, us per request (cProfile's overhead included):")
    rows = sorted(raw.items(), key=lambda item: -item[1][3])
    shown = 0
    for (path, line, name), (_cc, count, own, cumulative, _callers) in rows:
        if package(path) not in ("daari", "actors") or shown >= 60:
            continue
        shown += 1
        where = path.split("/daari/")[-1] if "/daari/" in path else path.split("/actors/")[-1]
        print(f"  {cumulative / requests * 1e6:8.0f} {own / requests * 1e6:7.0f} {count / requests:6.1f}  "
              f"{package(path)}/{where}:{line}({name})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", action="store_true", help="streamed answers")
    parser.add_argument("--words", type=int, default=0,
                        help="ask the fake's \"long\" model for this many words, one delta each (0: its short "
                        "\"good\" answer); two runs at two lengths give the CPU per relayed delta")
    parser.add_argument("--calls", type=int, default=300, help="requests per run (five runs)")
    parser.add_argument("--profile", type=int, default=0, help="cProfile this many requests instead")
    parser.add_argument("--save", default="", help="with --profile: write the profile to this file too")
    parser.add_argument("--instructions", action="store_true",
                        help="instructions per request under callgrind (needs valgrind; minutes)")
    parser.add_argument("--steps", action="store_true", help="CPU per request by pipeline step")
    parser.add_argument("--legs", action="store_true", help="CPU per request by leg of its path: before the "
                        "upstream send, the answer read to the first body byte, after it (whole answers)")
    parser.add_argument("--pace", type=float, default=0.0,
                        help="seconds the fake waits before each delta (0: unpaced; paced, each read holds one "
                        "delta: under callgrind a pace of 0.02 s keeps daari's ~50x slower reads one delta each)")
    parser.add_argument("--first-write", action="store_true", help="with --stream and --words: CPU and wall from "
                        "the read of the first delta to its body message (a paced fake: --pace)")
    parser.add_argument("--anthropic", action="store_true",
                        help="an Anthropic client (/v1/messages) on an Anthropic tier (the fake Anthropic upstream)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="with --instructions: copy each window's callgrind dump into this directory")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # the measured process, given the upstream
    args = parser.parse_args()
    if args.child:
        trio.run(measure, args.child, args.stream, args.calls, 0, "", True, False, args.words, False,
                 args.anthropic)
        return
    kind = "anthropic" if args.anthropic else "openai"
    with workdir() as log_dir, fake_upstream(kind, log_dir, token_delay_s=args.pace) as upstream:
        if args.instructions:
            print(instructions(upstream.url, args.stream, args.calls, log_dir, args.words, args.anthropic,
                               args.keep))
        else:
            trio.run(measure, upstream.url, args.stream, args.calls, args.profile, args.save, False, args.steps,
                     args.words, args.legs, args.anthropic, args.first_write)


def instructions(upstream_url: str, stream: bool, calls: int, tmp: Path, words: int = 0,
                 anthropic: bool = False, keep: Path | None = None) -> str:
    """The measured process under callgrind: its counters dumped before and after each of three windows of
    `calls` requests; the median window's instructions per request. `keep`: each window's dump copied there
    (window1.cg ..., for callgrind_annotate)."""
    from bench.body_size import _dump

    out = tmp / "cg.out"
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            *(["--compress-strings=no", "--compress-pos=no"] if keep else []), sys.executable, "-m",
            "bench.passthrough_cpu", "--child", upstream_url, "--calls", str(calls), *(["--stream"] if stream else []),
            "--words", str(words), *(["--anthropic"] if anthropic else [])]
    per_request: list[float] = []
    with (tmp / "measured.log").open("w") as log, subprocess.Popen(
            argv, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=log, text=True) as process:
        assert process.stdin is not None and process.stdout is not None
        for line in process.stdout:
            window = keep / f"window{len(per_request) + 1}.cg" if keep and line.strip() == "done" else None
            counted = _dump(process.pid, out, window)
            if line.strip() == "done":
                per_request.append(counted / calls)
            process.stdin.write("go\n")
            process.stdin.flush()
    if process.returncode != 0 or len(per_request) != 3:
        raise RuntimeError(f"the measured process failed: {(tmp / 'measured.log').read_text()[-2000:]}")
    kind = "stream" if stream else "request"
    return (f"daari instructions per pass-through {kind}: {sorted(per_request)[1]:,.0f} (median of "
            f"{', '.join(f'{r:,.0f}' for r in per_request)}; {calls} per window)")


if __name__ == "__main__":
    main()
