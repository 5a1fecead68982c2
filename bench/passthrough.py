"""`python -m bench.passthrough`: cache off (`X-Daari-No-Cache: true`), daari vs calling the upstream directly.

The same fake OpenAI upstream (own process) answers both; the difference is what daari adds: parsing,
classification, the ExecutorActor, the httpx upstream call, re-rendering. Targets (issue 2): added p50
<= 1 ms and added p99 <= 5 ms at 1 connection.
"""

from __future__ import annotations

import argparse

from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config
from bench.load import Measured, measure, tool_name
from bench.report import Table, fmt, print_tables, ratio
from bench.servers import client_cores, daari, dumps, fake_upstream, pin, placement, server_core, workdir

WARMUP_S = 2.0


def run(duration_s: float = 10.0) -> list[Table]:
    # The model "good" selects the fake's behaviour when it is called directly (daari's tier sets it too).
    body = dumps({**REQUEST, "model": "good"})
    no_cache = {**HEADERS, "X-Daari-No-Cache": "true"}
    results: dict[tuple[str, int], Measured] = {}
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, \
            daari(proxy_config(upstream.url), tmp, cores=server_core()) as proxy:
        for name, server, headers in (("direct to upstream", upstream, HEADERS),
                                      ("through daari (no cache)", proxy, no_cache)):
            # With a pinned placement the process answering the client gets the server core and the upstream
            # behind daari goes with the client (at 1 connection the three never run at once).
            pin(upstream, server_core() if server is upstream else client_cores())
            measure(server, PATH, body, headers, connections=20, duration_s=WARMUP_S)
            for connections in (1, 20):
                results[(name, connections)] = measure(server, PATH, body, headers, connections=connections,
                                                       duration_s=duration_s)
    table = Table("Pass-through: daari with the cache off vs the upstream called directly (same run)",
                  ["path", "connections", "requests", "req/s", "p50 ms", "p99 ms", "answering process CPU",
                   "its CPU us/request", "client CPU"])
    for connections in (1, 20):
        for name in ("direct to upstream", "through daari (no cache)"):
            m = results[(name, connections)]
            table.add(name, connections, m.load.requests, m.load.rps, m.load.p50_ms, m.load.p99_ms,
                      f"{m.server_cpu_pct:.0f}%", m.cpu_us_per_request, f"{m.load.client_cpu_pct:.0f}%")
    table.notes += [
        f"client: {tool_name()} (1 thread), {duration_s:g} s per row after a {WARMUP_S:g} s warm-up; the upstream "
        "is tests/fakes/openai_upstream.py served by Hypercorn; daari's answering-process CPU does not include "
        f"the upstream's; process placement: {placement()}",
        "tiers.L3.max_concurrency is the openai executor's default, 32 (more than the 20 connections)",
    ]
    direct1, via1 = results[("direct to upstream", 1)], results[("through daari (no cache)", 1)]
    direct20, via20 = results[("direct to upstream", 20)], results[("through daari (no cache)", 20)]
    added_p50 = via1.load.p50_ms - direct1.load.p50_ms
    added_p99 = via1.load.p99_ms - direct1.load.p99_ms
    verdict = Table("Pass-through vs the issue's targets (1 connection)", ["measure", "measured", "target", "met"])
    verdict.add("added p50", f"{fmt(added_p50)} ms", "<= 1 ms", "yes" if added_p50 <= 1 else "NO")
    verdict.add("added p99", f"{fmt(added_p99)} ms", "<= 5 ms", "yes" if added_p99 <= 5 else "NO")
    verdict.add("daari / direct p50", ratio(via1.load.p50_ms, direct1.load.p50_ms), "(context)", "")
    verdict.add("daari / direct req/s at 20 connections", ratio(via20.load.rps, direct20.load.rps),
                "(context)", "")
    return [table, verdict]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measured row")
    print_tables(run(parser.parse_args().duration))


if __name__ == "__main__":
    main()
