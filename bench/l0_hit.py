"""`python -m bench.l0_hit`: the L0 hit path. daari answering a cached request vs a bare Hypercorn app.

A fake OpenAI upstream (own process) is daari's L3; one request warms the cache, then the identical request
is measured: p50/p99 at 1 connection and requests/s at 20 connections, against daari and, in the same run
with the same client, a bare Hypercorn-trio app answering the same bytes. Targets (issue 2): p50 <= 1 ms,
>= 1,500 req/s at 20 connections, >= 70% of the bare app's req/s.
"""

from __future__ import annotations

import argparse

import httpx

from bench.load import Measured, measure, tool_name
from bench.report import Table, fmt, print_tables, ratio
from bench.servers import (
    Server,
    bare_app,
    client_cores,
    daari,
    dumps,
    fake_upstream,
    l0_hits,
    openai_tier,
    placement,
    server_core,
    workdir,
)

PATH = "/v1/chat/completions"
REQUEST = {"model": "gpt-4o-mini", "temperature": 0, "messages": [
    {"role": "system", "content": "You are a helpful coding assistant."},
    {"role": "user", "content": "What does `git rebase -i HEAD~3` do?"}]}
HEADERS = {"Content-Type": "application/json"}
WARMUP_S = 2.0




def proxy_config(upstream_url: str) -> dict[str, object]:
    """daari with one tier, L3 = the fake OpenAI upstream (model "good": a plain answer).

    The tier's max_concurrency is the openai executor's default, 32, so that 20 client connections are not
    queued behind the tier's limiter in the pass-through run.
    """
    return {"server": {"grace_period_s": 1}, "tiers": {"L3": openai_tier(upstream_url, "good")}}


def warm_hit(server: Server, timeout_s: float = 30) -> tuple[bytes, list[tuple[str, str]]]:
    """Store the answer (one miss), check the next identical request is an L0 hit, return its body + headers."""
    with httpx.Client(base_url=server.url, timeout=timeout_s) as client:
        first = client.post(PATH, content=dumps(REQUEST), headers=HEADERS)
        first.raise_for_status()
        hit = client.post(PATH, content=dumps(REQUEST), headers=HEADERS)
    if hit.headers.get("x-daari-cache") != "hit" or hit.json()["daari_meta"]["tier"] != "L0":
        raise RuntimeError(f"the warmed request was not an L0 hit: {hit.headers} {hit.text[:300]}")
    # The bare app must send what daari sends: its length too (without it Hypercorn answers chunked, ~7% more
    # work per request for the bare app, which flattered daari's ratio to it in runs before 2026-12-02 noon).
    keep = [(k, v) for k, v in hit.headers.items()
            if k in ("content-type", "content-length") or k.startswith("x-daari")]
    return hit.content, keep


def _row(table: Table, name: str, m: Measured) -> None:
    table.add(name, m.load.connections, m.load.requests, m.load.rps, m.load.p50_ms, m.load.p99_ms,
              f"{m.server_cpu_pct:.0f}%", m.cpu_us_per_request, f"{m.load.client_cpu_pct:.0f}%")


def run(duration_s: float = 10.0) -> list[Table]:
    body = dumps(REQUEST)
    results: dict[tuple[str, int], Measured] = {}
    with workdir() as tmp, fake_upstream("openai", tmp, cores=client_cores()) as upstream, \
            daari(proxy_config(upstream.url), tmp, cores=server_core()) as proxy:
        hit_body, hit_headers = warm_hit(proxy)
        hits_before = l0_hits(proxy)
        with bare_app(hit_body, hit_headers, tmp, cores=server_core()) as bare:
            for name, server in (("daari L0 hit", proxy), ("bare Hypercorn app", bare)):
                measure(server, PATH, body, HEADERS, connections=20, duration_s=WARMUP_S)
                for connections in (1, 20):
                    results[(name, connections)] = measure(server, PATH, body, HEADERS,
                                                           connections=connections, duration_s=duration_s)
        hits = l0_hits(proxy) - hits_before
    daari_runs = [m for (name, _), m in results.items() if name.startswith("daari")]
    completed = sum(m.load.requests for m in daari_runs)

    table = Table("L0 hit path: daari vs a bare Hypercorn app (same client, same run)",
                  ["server", "connections", "requests", "req/s", "p50 ms", "p99 ms", "server CPU",
                   "server CPU us/request", "client CPU"])
    for connections in (1, 20):
        for name in ("daari L0 hit", "bare Hypercorn app"):
            _row(table, name, results[(name, connections)])
    table.notes += [
        f"client: {tool_name()} (1 thread), {duration_s:g} s per row after a {WARMUP_S:g} s warm-up at 20 "
        f"connections; CPU in % of one core; process placement: {placement()}",
        f"response: {len(hit_body)} bytes of JSON (the bare app sends the same bytes and headers)",
        f"daari counted {hits:.0f} L0 hits during the runs (warm-ups included); the client completed "
        f"{completed} measured requests: every measured request was a hit" if hits >= completed else
        f"WARNING: daari counted only {hits:.0f} L0 hits for {completed} measured requests",
    ]
    d1, b1 = results[("daari L0 hit", 1)], results[("bare Hypercorn app", 1)]
    d20, b20 = results[("daari L0 hit", 20)], results[("bare Hypercorn app", 20)]
    share = d20.load.rps / b20.load.rps
    verdict = Table("L0 hit path vs the issue's targets", ["measure", "measured", "target", "met"])
    verdict.add("p50 at 1 connection", f"{fmt(d1.load.p50_ms)} ms", "<= 1 ms", _yes(d1.load.p50_ms <= 1.0))
    verdict.add("req/s at 20 connections", fmt(d20.load.rps), ">= 1,500", _yes(d20.load.rps >= 1500))
    verdict.add("daari / bare req/s at 20 connections", f"{share:.0%}", ">= 70%", _yes(share >= 0.70))
    verdict.add("daari / bare p50 at 1 connection", ratio(d1.load.p50_ms, b1.load.p50_ms), "(context)", "")
    verdict.add("daari at 20 / daari at 1 connection, req/s", ratio(d20.load.rps, d1.load.rps), "(context)", "")
    return [table, verdict]


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measured row")
    print_tables(run(parser.parse_args().duration))


if __name__ == "__main__":
    main()
