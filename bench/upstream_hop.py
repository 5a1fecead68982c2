"""`python -m bench.upstream_hop`: what the upstream hop costs a pass-through request, by HTTP client, in one run.

Pass-through (the default): the same upstream answers a client directly and through daari with the cache off
(`X-Daari-No-Cache: true`), daari once with its lean client (`http_client: auto`, the default for a plain-http
upstream) and once with httpx as shipped (`http_client: httpx`), optionally also daari at another git revision
(`--versus REV`, e.g. the commit before the lean client). The paths take turns, `--rounds` times; each turn's
added p50/p99 is that path's figure minus the direct call's in the same round, and the table shows the medians
(issue 23's targets: added p50 <= 1 ms and added p99 <= 5 ms at 1 connection).

    python -m bench.upstream_hop                          # Hypercorn fake upstream (tests/fakes/openai_upstream.py)
    python -m bench.upstream_hop --upstream http.server   # head and body in two writes, no TCP_NODELAY (delayed ACKs)
    python -m bench.upstream_hop --versus c45f1e6         # and daari at c45f1e6 (httpx with httpcore overrides)
    python -m bench.upstream_hop --cpu                    # the hop alone: this process's CPU per request, both clients
    python -m bench.upstream_hop --cpu --stream 100       # a 100-chunk SSE stream per request: CPU per chunk too
    python -m bench.upstream_hop --instructions           # instructions per request under callgrind (needs valgrind)

`--cpu` calls the upstream (its own process) from this process with each client in turn: the same POST, the
whole answer read, one keep-alive connection, one request at a time; the figure is this thread's CPU time
(`time.thread_time`) per request, the median of `--rounds` alternating turns. It moves with the client's code,
not with the machine's load. `--instructions` runs that under `valgrind --tool=callgrind` twice per client
(`--requests` and a tenth of it) and prints the difference per request: instruction counts ignore the load.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from bench.l0_hit import HEADERS, PATH, proxy_config
from bench.load import Measured, measure, tool_name
from bench.report import Table, fmt, machine, print_tables, ratio
from bench.servers import (
    ROOT,
    Server,
    daari,
    dumps,
    fake_upstream,
    placement,
    server_core,
    workdir,
    write_write_upstream,
)
from bench.versus import exported
from daari.executors.lean_http import LeanClient
from daari.protocol.sse import SSEDecoder

BODY = {"model": "good", "temperature": 0, "messages": [
    {"role": "system", "content": "You are a helpful coding assistant."},
    {"role": "user", "content": "What does `git rebase -i HEAD~3` do?"}]}
CLIENTS = ("lean", "httpx")


def make_client(kind: str) -> Any:
    if kind == "lean":
        return LeanClient(connect_timeout_s=5)
    return httpx.AsyncClient(timeout=httpx.Timeout(connect=5, read=None, write=None, pool=None),
                             limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))


async def call(client: Any, url: str, content: bytes, headers: dict[str, str], stream: bool) -> int:
    """One request, its whole body read (decoded as SSE events for a stream); returns the events seen."""
    async with client.stream("POST", url, content=content, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"upstream answered {response.status_code}")
        if not stream:
            await response.aread()
            return 1
        decoder, events = SSEDecoder(), 0
        async for piece in response.aiter_bytes():
            events += len(decoder.feed(piece))
        return events


async def turns(url: str, kinds: tuple[str, ...], requests: int, rounds: int, stream_chunks: int
                ) -> dict[str, list[tuple[float, int]]]:
    body = dict(BODY)
    if stream_chunks:
        body.update(model="long", stream=True, max_tokens=stream_chunks)
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "authorization": "Bearer sk-bench"}
    endpoint = url + "/v1/chat/completions"
    clients = {kind: make_client(kind) for kind in kinds}
    out: dict[str, list[tuple[float, int]]] = {kind: [] for kind in kinds}
    for client in clients.values():
        for _ in range(20):  # warm: connection open, code paths taken
            await call(client, endpoint, content, headers, bool(stream_chunks))
    for _ in range(rounds):
        for kind, client in clients.items():
            events = 0
            start = time.thread_time()
            for _ in range(requests):
                events += await call(client, endpoint, content, headers, bool(stream_chunks))
            out[kind].append(((time.thread_time() - start) / requests * 1e6, events // requests))
    for client in clients.values():
        await client.aclose()
    return out

DIRECT = "direct to the upstream"
WARMUP_S = 2.0


@contextmanager
def upstream_server(kind: str, log_dir: Path) -> Iterator[Server]:
    if kind == "http.server":
        with write_write_upstream(log_dir) as server:
            yield server
    else:
        with fake_upstream("openai", log_dir) as server:
            yield server


def passthrough_paths(stack: ExitStack, upstream: Server, log_dir: Path, versus: str | None) -> dict[str, Server]:
    """The servers a pass-through request is measured against: the upstream, daari with each client, daari at
    `versus`."""
    paths = {DIRECT: upstream}
    for name, choice in (("daari, lean client", "auto"), ("daari, httpx as shipped", "httpx")):
        config = proxy_config(upstream.url)
        config["tiers"]["L3"]["http_client"] = choice  # type: ignore[index]
        paths[name] = stack.enter_context(daari(config, log_dir, cores=server_core()))
    if versus:
        tree = stack.enter_context(exported(versus))
        paths[f"daari at {versus}"] = stack.enter_context(daari(proxy_config(upstream.url), log_dir,
                                                                cores=server_core(), tree=tree))
    return paths


def passthrough_tables(upstream_kind: str, duration_s: float, rounds: int, versus: str | None) -> list[Table]:
    body = dumps({"model": "good", "temperature": 0, "messages": BODY["messages"]})
    no_cache = {**HEADERS, "X-Daari-No-Cache": "true"}
    runs: dict[tuple[str, int], list[Measured]] = {}
    with workdir() as tmp, upstream_server(upstream_kind, tmp) as upstream, ExitStack() as stack:
        paths = passthrough_paths(stack, upstream, tmp, versus)
        names = list(paths)
        for server in paths.values():
            measure(server, PATH, body, HEADERS if server is upstream else no_cache, connections=20,
                    duration_s=WARMUP_S)
        for turn in range(rounds):
            order = names[turn % len(names):] + names[:turn % len(names)]  # nobody always goes first
            for connections in (1, 20):
                for name in order:
                    server = paths[name]
                    runs.setdefault((name, connections), []).append(measure(
                        server, PATH, body, HEADERS if server is upstream else no_cache, connections=connections,
                        duration_s=duration_s))
    upstream_name = ("Python's http.server (head and body in two writes, no TCP_NODELAY)"
                     if upstream_kind == "http.server" else "tests/fakes/openai_upstream.py on Hypercorn")
    table = Table(f"Pass-through by upstream HTTP client, upstream: {upstream_name}; medians of {rounds} turns",
                  ["path", "conns", "p50 ms", "added p50 ms", "p99 ms", "added p99 ms", "p50 vs direct",
                   "req/s", "req/s vs direct", "its CPU us/request", "turns: added p50 / added p99 ms"])
    for connections in (1, 20):
        direct = runs[(DIRECT, connections)]
        for name in names:
            mine = runs[(name, connections)]
            p50 = statistics.median(m.load.p50_ms for m in mine)
            p99 = statistics.median(m.load.p99_ms for m in mine)
            rps = statistics.median(m.load.rps for m in mine)
            added = [(m.load.p50_ms - d.load.p50_ms, m.load.p99_ms - d.load.p99_ms)
                     for m, d in zip(mine, direct, strict=True)]
            is_direct = name == DIRECT
            table.add(name, connections, p50, "" if is_direct else fmt(statistics.median(a for a, _ in added)), p99,
                      "" if is_direct else fmt(statistics.median(b for _, b in added)),
                      ratio(p50, statistics.median(m.load.p50_ms for m in direct)), rps,
                      ratio(rps, statistics.median(m.load.rps for m in direct)),
                      statistics.median(m.cpu_us_per_request for m in mine),
                      "" if is_direct else " / ".join(f"{a:.2f}/{b:.1f}" for a, b in added))
    table.notes += [
        f"client: {tool_name()} (1 thread), {duration_s:g} s per row, after a {WARMUP_S:g} s warm-up at 20 "
        f"connections; the paths take turns (rotating who goes first); process placement: {placement()}",
        "added = that path's figure minus the direct call's in the same turn (median over turns); CPU is the "
        "answering process's (daari's, not the upstream's)",
        "tiers.L3 = the upstream, model good, X-Daari-No-Cache: true; daari's http_client: auto (lean) or httpx",
        machine(),
    ]
    return [table]


def cpu_table(upstream: Server, requests: int, rounds: int, stream_chunks: int) -> Table:
    results = trio.run(turns, upstream.url, CLIENTS, requests, rounds, stream_chunks)
    what = f"a {stream_chunks}-chunk SSE stream" if stream_chunks else "a whole JSON answer"
    table = Table(f"The upstream hop: this process's CPU per request ({what}), median of {rounds} turns",
                  ["client", "CPU us/request", "vs httpx", "events/request", "CPU us/event", "turns, us/request"])
    medians = {kind: statistics.median(us for us, _ in runs) for kind, runs in results.items()}
    for kind in CLIENTS:
        events = results[kind][0][1]
        table.add(kind, medians[kind], ratio(medians[kind], medians["httpx"]), events,
                  medians[kind] / max(1, events), " / ".join(f"{us:.0f}" for us, _ in results[kind]))
    table.notes.append(f"{requests} requests per turn, one at a time over one keep-alive connection, against "
                       "tests/fakes/openai_upstream.py (model good) in its own process")
    return table


def instructions(upstream_url: str, kind: str, requests: int, stream_chunks: int) -> int:
    """Instructions this script executes for `requests` calls with `kind`, counted by callgrind."""
    with tempfile.TemporaryDirectory(prefix="daari-cg-") as tmp:
        out = Path(tmp) / "cg.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
                        "bench.upstream_hop", "--child", upstream_url, "--only", kind, "--requests", str(requests),
                        "--stream", str(stream_chunks)], cwd=ROOT, check=True, capture_output=True)
        text = out.read_text(errors="replace")
    match = re.search(r"^summary:\s*(\d+)", text, re.M) or re.search(r"^totals:\s*(\d+)", text, re.M)
    if match is None:
        raise RuntimeError("callgrind wrote no summary")
    return int(match.group(1))


def instructions_table(upstream: Server, requests: int, stream_chunks: int) -> Table:
    table = Table("The upstream hop: instructions per request (callgrind; the difference of two runs)",
                  ["client", "instructions/request", "vs httpx"])
    small = max(1, requests // 10)
    per: dict[str, float] = {}
    for kind in CLIENTS:
        per[kind] = (instructions(upstream.url, kind, requests, stream_chunks)
                     - instructions(upstream.url, kind, small, stream_chunks)) / (requests - small)
    for kind in CLIENTS:
        table.add(kind, f"{per[kind]:,.0f}", ratio(per[kind], per["httpx"]))
    table.notes.append(f"runs of {requests} and {small} requests each, their difference divided by "
                       f"{requests - small}: start-up and imports cancel out")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", choices=("hypercorn", "http.server"), default="hypercorn",
                        help="pass-through: the upstream daari and the direct client call")
    parser.add_argument("--duration", type=float, default=5.0, help="pass-through: seconds per measured row")
    parser.add_argument("--versus", metavar="REV", help="pass-through: also daari at git revision REV")
    parser.add_argument("--rounds", type=int, default=3, help="turns each path or client takes")
    parser.add_argument("--cpu", action="store_true", help="the hop alone: this process's CPU per request")
    parser.add_argument("--requests", type=int, default=2000, help="--cpu: requests per turn")
    parser.add_argument("--stream", type=int, default=0, metavar="CHUNKS", help="--cpu: ask for a stream of CHUNKS")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind")
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=CLIENTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one client's calls, under valgrind
        trio.run(turns, args.child, (args.only,), args.requests, 1, args.stream)
        return
    if args.instructions and not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    if not (args.cpu or args.instructions):
        print_tables(passthrough_tables(args.upstream, args.duration, args.rounds, args.versus))
        return
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        if args.instructions:
            print_tables([instructions_table(upstream, min(args.requests, 500), args.stream)])
        else:
            print_tables([cpu_table(upstream, args.requests, args.rounds, args.stream)])


if __name__ == "__main__":
    main()
