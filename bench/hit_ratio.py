"""`python -m bench.hit_ratio [REV]`: issue 23's L0-hit ratio alone: daari's hit vs the bare Hypercorn app.

The bare Hypercorn-trio app (bench/bare_app.py: reads the body, answers the bytes and headers of daari's hit), daari
from this tree and, given REV, daari at REV (exported with `git archive`), all on Hypercorn, each its own process in
front of the same fake upstream, up at once; wrk at `--connections` (20) takes turns between them, `--rounds` times,
the order rotating each round. Per server: the median req/s and CPU per request; per daari: the ratio to the bare
app within each turn (a turn's servers ran back to back, so the machine was the same), with its median and spread.
No LiteLLM and no h11 rows: `make bench-peers` has those; this is the one target, run often and quickly.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
from pathlib import Path
from typing import Any

from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config, warm_hit
from bench.load import Measured, measure, tool_name
from bench.report import Table, print_tables
from bench.servers import Server, bare_app, daari, dumps, fake_upstream, workdir
from bench.versus import exported

WARMUP_S = 2.0
BARE = "bare Hypercorn app"
BARE_CHUNKED = "bare Hypercorn app, chunked (the reference before 2026-12-02 noon)"


def run(rev: str | None, duration_s: float, rounds: int, connections: int,
        variants: dict[str, dict[str, Any]] | None = None, chunked: bool = False) -> list[Table]:
    body = dumps(REQUEST)
    runs: dict[str, list[Measured]] = {}
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, \
            (exported(rev) if rev else contextlib.nullcontext(None)) as old_tree, contextlib.ExitStack() as stack:
        servers: dict[str, Server] = {"daari L0 hit (this tree)": stack.enter_context(
            daari(proxy_config(upstream.url), tmp))}
        hit_body, hit_headers = warm_hit(servers["daari L0 hit (this tree)"])
        if old_tree is not None:
            servers[f"daari L0 hit ({rev})"] = stack.enter_context(daari(proxy_config(upstream.url), tmp,
                                                                         tree=Path(old_tree)))
            warm_hit(servers[f"daari L0 hit ({rev})"])
        for label, overlay in (variants or {}).items():
            config = proxy_config(upstream.url)
            for section, values in overlay.items():
                present = config.get(section)
                config[section] = {**(present if isinstance(present, dict) else {}), **values}
            servers[f"daari L0 hit ({label})"] = stack.enter_context(daari(config, tmp))
            warm_hit(servers[f"daari L0 hit ({label})"])
        servers[BARE] = stack.enter_context(bare_app(hit_body, hit_headers, tmp))
        if chunked:  # the same answer without its length, so Hypercorn sends it chunked: earlier runs' reference
            servers[BARE_CHUNKED] = stack.enter_context(bare_app(
                hit_body, [(k, v) for k, v in hit_headers if k != "content-length"], tmp))
        for server in servers.values():
            measure(server, PATH, body, HEADERS, connections=connections, duration_s=WARMUP_S)
        names = list(servers)
        for turn in range(rounds):
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                runs.setdefault(name, []).append(measure(servers[name], PATH, body, HEADERS,
                                                         connections=connections, duration_s=duration_s))
    table = Table(f"L0 hit vs the bare Hypercorn app at {connections} connections ({rounds} turns of "
                  f"{duration_s:g} s, medians)", ["server", "req/s", "turns, req/s", "CPU us/req", "p50 ms",
                                                   "ratio to bare (median)", "ratio, each turn"])
    for name, measured in runs.items():
        rps = [m.load.rps for m in measured]
        ratios = [m.load.rps / b.load.rps for m, b in zip(measured, runs[BARE], strict=True)]
        table.add(name, statistics.median(rps), " / ".join(f"{r:,.0f}" for r in rps),
                  statistics.median(m.cpu_us_per_request for m in measured),
                  statistics.median(m.load.p50_ms for m in measured),
                  "" if name == BARE else f"{statistics.median(ratios):.3f}x",
                  "" if name == BARE else " / ".join(f"{r:.2f}" for r in ratios))
    if chunked:
        table.notes.append(f"{BARE_CHUNKED}: the same bytes without a Content-Length header; the ratios are to "
                           f"{BARE}, which sends the hit's headers, its length included, as daari does")
    table.notes.append(f"client: {tool_name()} (1 thread), after a {WARMUP_S:g} s warm-up per server; the servers "
                       "took turns, the order rotating each round; CPU includes each server's child processes "
                       "(daari's decision log writer)")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", nargs="?", help="also serve daari at this git revision (before/after in one run)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured turn")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=JSON",
                        help="also serve this tree with JSON config sections merged in, e.g. "
                             "'no L1={\"cache\": {\"l1\": {\"enabled\": false}}}'")
    parser.add_argument("--chunked", action="store_true",
                        help="also serve the bare app answering chunked (no Content-Length): the reference before "
                             "2026-12-02 noon")
    args = parser.parse_args()
    variants = {name: json.loads(text) for name, _, text in (v.partition("=") for v in args.variant)}
    print_tables(run(args.rev, args.duration, args.rounds, args.connections, variants, args.chunked))


if __name__ == "__main__":
    main()
