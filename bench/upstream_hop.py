"""`python -m bench.upstream_hop`: the upstream hop alone, daari's lean client vs httpx as shipped, by CPU per request.

One process calls the same upstream (its own process, so its CPU is not counted) with each client in turn: the
same POST of a chat request, the whole answer read, one connection kept alive, one request at a time. The
figure is this thread's CPU time (`time.thread_time`) per request, the median of `--rounds` alternating turns:
it moves with the client's code, not with the machine's load, so it compares the two on a busy machine.

    python -m bench.upstream_hop                        # CPU per request, both clients, median of 5 turns
    python -m bench.upstream_hop --stream 100           # a 100-chunk SSE stream per request: CPU per chunk too
    python -m bench.upstream_hop --instructions         # instructions per request under callgrind (needs valgrind)

`--instructions` runs this script under `valgrind --tool=callgrind` twice per client (`--requests` and a tenth
of it) and prints the difference per request: instruction counts do not depend on the load at all.
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
from pathlib import Path
from typing import Any

import httpx
import trio

from bench.report import Table, print_tables, ratio
from bench.servers import ROOT, Server, fake_upstream, workdir
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
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stream", type=int, default=0, metavar="CHUNKS", help="ask for a stream of CHUNKS chunks")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind")
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=CLIENTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one client's calls, under valgrind
        trio.run(turns, args.child, (args.only,), args.requests, 1, args.stream)
        return
    if args.instructions and not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        if args.instructions:
            print_tables([instructions_table(upstream, min(args.requests, 500), args.stream)])
        else:
            print_tables([cpu_table(upstream, args.requests, args.rounds, args.stream)])


if __name__ == "__main__":
    main()
