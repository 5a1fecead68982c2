"""`python -m bench.shadow`: what shadow sampling costs a client. daari with `trust.shadow.rate` 0 vs 1.0, back to
back in one run, on the L0 hit path (the path where a few microseconds show most).

Three servers take turns (`--rounds`, median turn shown) against one fake OpenAI upstream (own process):
sampling off (rate 0), every hit sampled under the default caps (6 shadow calls a minute, the rest skipped in
the step), and every hit sampled with the caps lifted (each hit told to the ShadowActor, which runs shadow calls
back to back against the instant fake upstream and drops what its queue cannot hold: the worst case). Each row:
req/s, p50 and p99 latency, daari's CPU per request, and the ratio of p50 and p99 to sampling off. The shadow
counters read from /metrics after each turn show that sampling really ran. Target (issue 20): p50 at 100%
sampling <= 1.05x of 0%.

On a machine shared with other work, loopback latency swings far more than the cost measured here, so a second
table measures the same three setups in one process with no sockets: one ASGI call of the real DaariApp on an L0
hit (as bench.hit_steps does), `--calls` calls per repeat, the setups taking turns, timed in the event loop
thread's CPU time (what other processes take from the machine is not counted), the best repeat of each. With
the caps lifted, the ShadowActor runs its shadow calls against a fake upstream in the same process and event
loop, so their CPU is charged to the hits: the worst case (what its queue still holds when a turn ends runs
before the next setup's turn, uncounted).
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from typing import Any

import httpx
import trio

from actors.shadow import ShadowIdle
from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config, warm_hit
from bench.load import Measured, measure, tool_name
from bench.report import Table, print_tables, ratio
from bench.servers import Server, daari, dumps, fake_upstream, server_core, workdir
from daari.cache.l0_key import l0_key
from daari.cache.l0_store import L0Entry
from daari.config import config_from_dict
from daari.jsonio import loads
from daari.protocol.chat import Completion, Usage
from daari.protocol.wire import OPENAI
from daari.server.serve import run_server
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app

COMPLETION = Completion(text="An interactive rebase of the last three commits: git opens an editor listing them.",
                        usage=Usage(prompt_tokens=24, completion_tokens=20), model="good", finish_reason="stop")

WARMUP_S = 2.0
CONNECTIONS = (1, 20)
SETUPS: dict[str, dict[str, Any]] = {
    "rate 0 (off)": {"rate": 0.0},
    "rate 1.0, default caps": {"rate": 1.0},
    "rate 1.0, caps lifted": {"rate": 1.0, "max_per_minute": 1_000_000, "daily_tokens": 1_000_000_000},
}


def shadow_counts(server: Server) -> dict[str, float]:
    """The shadow counters of daari's /metrics, summed over their labels."""
    text = httpx.get(server.url + "/metrics", timeout=10).text
    counts: dict[str, float] = {}
    for name in ("shadow_drawn_total", "shadow_samples_total", "shadow_skipped_total"):
        counts[name] = sum(float(v) for v in re.findall(rf"^daari_{name}{{[^}}]*}} ([0-9.e+]+)$", text, re.M))
    return counts


def measure_setup(upstream_url: str, tmp: Any, duration_s: float, shadow: dict[str, Any]
                  ) -> tuple[dict[int, Measured], dict[str, float]]:
    # L1 off: the L0 hit path does not use it, its model's load would slow each start, and the fake's answers
    # repeat exactly, so no comparison needs an embedding.
    config: dict[str, Any] = {**proxy_config(upstream_url), "trust": {"shadow": shadow},
                              "cache": {"l1": {"enabled": False}}}
    out: dict[int, Measured] = {}
    body = dumps(REQUEST)
    with daari(config, tmp, cores=server_core(), wait_models=False) as proxy:
        warm_hit(proxy)
        measure(proxy, PATH, body, HEADERS, connections=20, duration_s=WARMUP_S)
        for connections in CONNECTIONS:
            out[connections] = measure(proxy, PATH, body, HEADERS, connections=connections, duration_s=duration_s)
        counts = shadow_counts(proxy)
    return out, counts


def median(runs: list[dict[int, Measured]], connections: int) -> Measured:
    ordered = sorted((run[connections] for run in runs), key=lambda m: m.load.p50_ms)
    return ordered[(len(ordered) - 1) // 2]


def run(duration_s: float = 5.0, rounds: int = 3) -> list[Table]:
    runs: dict[str, list[dict[int, Measured]]] = {name: [] for name in SETUPS}
    counts: dict[str, list[dict[str, float]]] = {name: [] for name in SETUPS}
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        for _ in range(rounds):
            for name, shadow in SETUPS.items():
                measured, seen = measure_setup(upstream.url, tmp, duration_s, shadow)
                runs[name].append(measured)
                counts[name].append(seen)
    table = Table(f"Shadow sampling on the L0 hit path: latency at rate 1.0 vs 0 (median of {rounds} turns)",
                  ["setup", "connections", "req/s", "p50 ms", "p99 ms", "p50 / off", "p99 / off", "CPU us/req",
                   "drawn / compared / skipped (last turn)"])
    for connections in CONNECTIONS:
        base = median(runs["rate 0 (off)"], connections)
        for name in SETUPS:
            m = median(runs[name], connections)
            seen = counts[name][-1]
            table.add(name, connections, m.load.rps, m.load.p50_ms, m.load.p99_ms,
                      ratio(m.load.p50_ms, base.load.p50_ms), ratio(m.load.p99_ms, base.load.p99_ms),
                      m.cpu_us_per_request,
                      f"{seen['shadow_drawn_total']:,.0f} / {seen['shadow_samples_total']:,.0f} / "
                      f"{seen['shadow_skipped_total']:,.0f}")
    table.notes.append(f"client: {tool_name()} (1 thread), {duration_s:g} s per row after a {WARMUP_S:g} s warm-up at "
                       "20 connections; each turn starts a fresh daari (default config but the shadow keys and L1 off) "
                       "in front of the same fake OpenAI upstream; the median turn by p50")
    return [table]


async def _in_process(calls: int, repeats: int) -> dict[str, float]:
    """Best microseconds per L0 hit through the real app, per setup, the setups taking turns."""
    with tempfile.TemporaryDirectory() as data:
        async with serve_app(FakeOpenAI()) as upstream, trio.open_nursery() as nursery:
            apps: dict[str, Any] = {}
            actors: dict[str, Any] = {}
            for name, shadow in SETUPS.items():
                config = config_from_dict({
                    "server": {"port": 0}, "data_dir": f"{data}/{len(apps)}", "cache": {"l1": {"enabled": False}},
                    "tiers": {"L3": {"executor": "openai", "base_url": upstream + "/v1", "model": "good"}},
                    "trust": {"shadow": shadow}})
                server = await nursery.start(run_server, config)
                actors[name] = server.parts.table.get("shadow")
                request = OPENAI.parse(loads(dumps(REQUEST)), {})
                server.parts.l0_memory.remember(l0_key(request).digest, L0Entry(COMPLETION, tier="L3"))
                apps[name] = server.parts.app
            raw = dumps(REQUEST)
            scope = {"type": "http", "method": "POST", "path": PATH,
                     "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]}

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": raw, "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                pass

            best = dict.fromkeys(SETUPS, float("inf"))
            for _ in range(repeats):
                for name, app in apps.items():
                    await app(scope, receive, send)
                    start = time.thread_time()  # the event loop thread's CPU: what other processes take is not in it
                    for _ in range(calls):
                        await app(scope, receive, send)
                        await trio.lowlevel.checkpoint()  # let the actors run between hits, as a server would
                    best[name] = min(best[name], (time.thread_time() - start) / calls * 1e6)
                    if actors[name] is not None:  # its queued shadow calls must not run during the next setup's turn
                        await actors[name].call(ShadowIdle())
            nursery.cancel_scope.cancel()
    return best


def in_process(calls: int = 2000, repeats: int = 7) -> list[Table]:
    best = trio.run(_in_process, calls, repeats)
    base = best["rate 0 (off)"]
    table = Table(f"Shadow sampling in process: one L0 hit through the real app (best of {repeats} x {calls} calls)",
                  ["setup", "CPU us per hit (event loop thread)", "/ off"])
    for name, us in best.items():
        table.add(name, us, ratio(us, base))
    table.notes.append("no sockets and no Hypercorn (bench.hit_steps' whole-app figure); each setup a running daari "
                       "in one process with L1 off; the caps-lifted setup's shadow calls go to a fake upstream in the "
                       "same process")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured row")
    parser.add_argument("--rounds", type=int, default=3, help="turns each setup takes (the median is shown)")
    parser.add_argument("--calls", type=int, default=2000, help="in-process hits per repeat")
    parser.add_argument("--in-process-only", action="store_true", help="skip the loopback load part")
    args = parser.parse_args()
    tables = in_process(args.calls)
    if not args.in_process_only:
        tables = run(args.duration, args.rounds) + tables
    print_tables(tables)


if __name__ == "__main__":
    main()
