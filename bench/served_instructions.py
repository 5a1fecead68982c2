"""`python -m bench.served_instructions [REV]`: instructions per request of the served process, daari's L0 hit vs
the bare Hypercorn app, under callgrind: the whole server (Hypercorn, h11, Trio, the app), as wrk drives it.

bench.hit_instructions counts daari's app called in process; what Hypercorn does around it, and what daari does
only when served (its decision log's hand-over, the tasks it wakes), shows only here. Each server runs under
`valgrind --tool=callgrind --instr-atstart=no` (start-up is not counted, and runs faster uninstrumented);
instrumentation is switched on with `callgrind_control`, `--requests` hits are sent over `--connections`
keep-alive connections (a fixed count: under valgrind a server is ~50x slower, so a count is what compares),
and the counters are dumped. Instructions are load-independent; `--cache-sim` also counts simulated cache misses
(first-level data and instruction misses, last-level misses), which is where a larger process pays more per
request for the same instructions. L1 is on as configured by default, as in bench.hit_ratio; the decision log's
writer is a child process and is not counted (`children` in bench.hit_ratio's CPU figure is).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config, warm_hit
from bench.load import run_load
from bench.report import Table, print_tables
from bench.servers import (
    HOST,
    PYTHON,
    ROOT,
    Server,
    _spawn,
    _wait_http,
    daari,
    dumps,
    fake_upstream,
    free_port,
    stop,
    workdir,
)
from bench.versus import exported

CHUNKED = "bare Hypercorn app, chunked (the reference before 2026-12-02 noon)"
EVENTS = ("Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm", "Bi", "Bim")
SIMULATED: list[str] = []  # extra callgrind options from the command line (--ll, --branch-sim)


def valgrind(out: Path, cache_sim: bool) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
            *(["--cache-sim=yes"] if cache_sim else []), *SIMULATED, PYTHON]


@contextlib.contextmanager
def bare_under(launcher: list[str], body: bytes, headers: list[tuple[str, str]], log_dir: Path) -> Iterator[Server]:
    port = free_port()
    body_path, headers_path = log_dir / f"bare-{port}.body", log_dir / f"bare-{port}.headers.json"
    body_path.write_bytes(body)
    headers_path.write_text(json.dumps(headers))
    process, log_path = _spawn(f"bare-{port}", [*launcher, "-m", "bench.bare_app", "--port", str(port), "--body-file",
                                                str(body_path), "--headers-file", str(headers_path)], log_dir, None)
    server = Server("bare app", f"http://{HOST}:{port}", process, log_path)
    try:
        _wait_http(server, "/healthz", 600)
        yield server
    finally:
        stop(server, timeout_s=120)


def merged(config: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """`config` with each section of `overlay` merged into its own (as bench.hit_ratio's --variant)."""
    out = dict(config)
    for section, values in overlay.items():
        present = out.get(section)
        out[section] = {**(present if isinstance(present, dict) else {}), **values}
    return out


def hits(server: Server, requests: int, connections: int) -> None:
    """`requests` POSTs over `connections` keep-alive connections at once; every answer must be a 200."""
    post_all(server, dumps(REQUEST), requests, connections, HEADERS)


def post_all(server: Server, body: bytes, requests: int, connections: int, headers: dict[str, str],
             must_hold: bytes = b"") -> None:
    """`requests` POSTs of `body` with `headers` over `connections` keep-alive connections at once, each answer
    read whole; every answer must be a 200 holding `must_hold`."""
    host, port = server.url.removeprefix("http://").split(":")
    failures: list[str] = []

    def one_connection(count: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        try:
            for _ in range(count):
                conn.request("POST", PATH, body=body, headers=headers)
                response = conn.getresponse()
                answer = response.read()
                if response.status != 200 or must_hold not in answer:
                    failures.append(f"HTTP {response.status}: {answer[:200]!r}")
        finally:
            conn.close()

    share = [requests // connections + (1 if i < requests % connections else 0) for i in range(connections)]
    threads = [threading.Thread(target=one_connection, args=(n,)) for n in share]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{server.name}: {len(failures)} failed requests ({failures[0]})")


def counted(server: Server, out: Path, requests: int, connections: int, wrk_s: float = 0.0) -> dict[str, int]:
    """Instrument `server` (running under callgrind), send the hits, dump; the dump's totals by event, with the
    requests counted as "requests" (`requests`, or what wrk completed in `wrk_s` seconds)."""
    pid = str(server.process.pid)
    hits(server, connections * 2, connections)  # connections open and warm before counting
    subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
    if wrk_s:
        requests = run_load(server.url + PATH, dumps(REQUEST), HEADERS, connections=connections,
                            duration_s=wrk_s).requests
    else:
        hits(server, requests, connections)
    time.sleep(1.0)  # what a hit queued for later (the decision log's hand-over) runs inside the count
    subprocess.run(["callgrind_control", "--dump=measured", pid], check=True, capture_output=True)
    subprocess.run(["callgrind_control", "--instr=off", pid], check=True, capture_output=True)
    dumps_ = sorted(out.parent.glob(out.name + "*"), key=lambda p: p.stat().st_mtime)
    for path in reversed(dumps_):
        text = path.read_text(errors="replace")
        if "measured" in text:
            events = re.search(r"^events:\s*(.+)$", text, re.M)
            totals = re.search(r"^(?:summary|totals):\s*(.+)$", text, re.M)
            if events and totals:
                return {**dict(zip(events.group(1).split(), map(int, totals.group(1).split()), strict=False)),
                        "requests": requests}
    raise RuntimeError(f"no callgrind dump for {server.name} in {out.parent}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", nargs="?", help="also count daari at this git revision")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--cache-sim", action="store_true", help="also count simulated cache misses (slower)")
    parser.add_argument("--chunked", action="store_true",
                        help="also count the bare app answering chunked (no Content-Length): the reference before "
                             "2026-12-02 noon")
    parser.add_argument("--ll", metavar="BYTES",
                        help="the simulated last-level cache's size (with --cache-sim): callgrind takes the host's "
                             "last level (480 MB here, shared with the whole host); 2097152 models this core's L2")
    parser.add_argument("--branch-sim", action="store_true", help="also count simulated branch mispredictions")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=JSON",
                        help="count this tree with JSON config sections merged in instead of as configured, e.g. "
                             "'no log={\"log\": {\"decisions\": false}}' (repeatable)")
    parser.add_argument("--wrk", type=float, default=0.0, metavar="SECONDS",
                        help="drive the counted hits with wrk for this long instead of --requests over Python's "
                             "http.client (the same client as bench.hit_ratio; a server under callgrind answers "
                             "~30-60 a second)")
    parser.add_argument("--no-bare", action="store_true", help="count daari only (a variant against a known bare)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="copy the callgrind dumps here (for callgrind_annotate: which functions miss)")
    args = parser.parse_args()
    if args.ll:
        SIMULATED.append(f"--LL={args.ll},16,64")
    if args.branch_sim:
        SIMULATED.append("--branch-sim=yes")
    results: dict[str, dict[str, int]] = {}
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, \
            (exported(args.rev) if args.rev else contextlib.nullcontext(None)) as old_tree:
        base = proxy_config(upstream.url)
        trees: list[tuple[str, Path | None, dict[str, Any]]] = [("daari L0 hit (this tree)", None, base)]
        if args.variant:
            trees = [(f"daari L0 hit ({name})", None, merged(base, json.loads(text)))
                     for name, _, text in (v.partition("=") for v in args.variant)]
        if old_tree is not None:
            trees.append((f"daari L0 hit ({args.rev})", Path(old_tree), base))
        hit_body: bytes | None = None
        hit_headers: list[tuple[str, str]] = []
        for label, tree, config in trees:
            out = tmp / f"cg-{len(results)}.out"
            with daari(config, tmp, tree=tree, launcher=[*valgrind(out, args.cache_sim), "-m", "daari"],
                       ready_timeout_s=900) as proxy:
                body, headers = warm_hit(proxy, timeout_s=600)  # the miss embeds: minutes under valgrind
                if hit_body is None:
                    hit_body, hit_headers = body, headers
                results[label] = counted(proxy, out, args.requests, args.connections, args.wrk)
            print(f"{label}: {results[label]}", flush=True)
        assert hit_body is not None
        out = tmp / "cg-bare.out"
        if not args.no_bare:
            with bare_under(valgrind(out, args.cache_sim), hit_body, hit_headers, tmp) as bare:
                results["bare Hypercorn app"] = counted(bare, out, args.requests, args.connections, args.wrk)
            print(f"bare Hypercorn app: {results['bare Hypercorn app']}", flush=True)
        if args.chunked:
            out = tmp / "cg-bare-chunked.out"
            unsized = [(k, v) for k, v in hit_headers if k != "content-length"]
            with bare_under(valgrind(out, args.cache_sim), hit_body, unsized, tmp) as bare:
                results[CHUNKED] = counted(bare, out, args.requests, args.connections, args.wrk)
            print(f"{CHUNKED}: {results[CHUNKED]}", flush=True)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for dump in tmp.glob("cg-*.out*"):
                shutil.copy(dump, args.keep / dump.name)
    bare_counts = results.get("bare Hypercorn app")
    bare_ir = bare_counts["Ir"] / bare_counts["requests"] if bare_counts is not None else math.nan
    shown = [e for e in EVENTS if all(e in r for r in results.values())]
    sent = f"wrk for {args.wrk:g} s" if args.wrk else f"{args.requests} requests"
    table = Table(f"The served process per request under callgrind ({sent} over "
                  f"{args.connections} connections)", ["server", *[f"{e}/req" for e in shown], "Ir vs bare",
                                                        "Ir over bare"])
    for label, counts in results.items():
        ir = counts["Ir"] / counts["requests"]
        table.add(label, *[f"{counts[e] / counts['requests']:,.0f}" for e in shown], f"{ir / bare_ir:.3f}x",
                  f"{ir - bare_ir:+,.0f}")
    table.notes.append("Ir: instructions; I1mr/D1mr/D1mw: first-level instruction/data read/write misses; "
                       "ILmr/DLmr/DLmw: last-level misses (callgrind's simulated caches, with --cache-sim; last level "
                       f"{args.ll or 'the host'}'s); Bc/Bcm, Bi/Bim: conditional and indirect branches and their "
                       "simulated mispredictions (--branch-sim); "
                       f"{ROOT.name}'s bench/bare_app.py is the bare app")
    print_tables([table])


if __name__ == "__main__":
    main()
