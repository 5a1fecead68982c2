"""`make bench-peers` (`python -m bench.peers --litellm PATH`): daari beside LiteLLM's proxy, same upstream, one run.

Every server is its own process on 127.0.0.1 with one worker, in front of the same fake upstream
(tests/fakes/openai_upstream.py on Hypercorn, model "good"), measured by the same load client (wrk when present)
at 1 and 20 connections, the paths taking turns `--rounds` times (medians):

- the upstream directly, and a bare Hypercorn-trio app answering daari's hit bytes (what a Python server costs),
  and the same bytes from bench/bare_h11.py (h11 over Trio sockets, no Hypercorn: what the front end costs);
- a cache hit: daari's L0 (the same request again) and LiteLLM with its in-memory cache (`cache_params: local`);
- pass-through: daari with `X-Daari-No-Cache: true` and LiteLLM without a cache;
- daari's hit, pass-through and TTFT rows again with `server.front_end: h11` (its own h11 front end);
- streaming TTFT: the time to the first content delta of a streamed answer (the fake's "long" model, `--words`
  deltas), one stream at a time over a new connection, directly, through daari (cache off) and through LiteLLM
  (no cache), the three taking turns (bench/stream_relay.py's raw-socket client).

LiteLLM is installed by `make bench-peers` into its own virtualenv under bench/.peers/ (ignored by git; the one
step that needs the network), never into daari's. No key: the fake upstream takes any.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import trio
import yaml

from bench.l0_hit import HEADERS, PATH, REQUEST, proxy_config, warm_hit
from bench.load import Measured, measure, tool_name
from bench.report import Table, machine, print_tables, ratio
from bench.servers import (
    HOST,
    Server,
    _spawn,
    _wait_http,
    bare_app,
    daari,
    dumps,
    fake_upstream,
    free_port,
    stop,
    workdir,
)
from bench.stream_relay import NO_CACHE, daari_config, request_of, stream, tier_of

WARMUP_S = 2.0
MASTER_KEY = "sk-bench-" + secrets.token_hex(16)  # LiteLLM's own key, for this run only
CONNECTIONS = (1, 20)
TTFT_PATHS = ("upstream directly", "daari pass-through", "daari pass-through (h11 front end)", "LiteLLM pass-through")


def on_h11(config: dict[str, Any]) -> dict[str, Any]:
    """The same daari on its own h11 front end (`server.front_end: h11`, docs/configuration.md, "Front end")."""
    server = config.get("server")
    return {**config, "server": {**(server if isinstance(server, dict) else {}), "front_end": "h11"}}


@contextlib.contextmanager
def litellm(executable: str, upstream_url: str, log_dir: Path, *, cache: bool) -> Iterator[Server]:
    """LiteLLM's proxy (`litellm --config`), one worker, the fake upstream as its only model."""
    port = free_port()
    config: dict[str, Any] = {
        "model_list": [{"model_name": name, "litellm_params": {
            "model": f"openai/{name}", "api_base": upstream_url + "/v1", "api_key": "sk-fake"}}
            for name in ("good", "long")],
        "litellm_settings": {"telemetry": False, **({"cache": True, "cache_params": {"type": "local"}}
                                                     if cache else {})},
        "general_settings": {"master_key": MASTER_KEY},  # it refuses to start without one
    }
    path = log_dir / f"litellm-{port}.yaml"
    path.write_text(yaml.safe_dump(config))
    process, log_path = _spawn(f"litellm-{port}", [executable, "--config", str(path), "--host", HOST, "--port",
                                                   str(port), "--num_workers", "1"], log_dir, None,
                               env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"})
    server = Server(f"litellm ({'cache' if cache else 'no cache'})", f"http://{HOST}:{port}", process, log_path)
    try:
        _wait_http(server, "/health/liveliness", 180)
        yield server
    finally:
        stop(server)


def stream_ttfts(targets: dict[str, tuple[Server, dict[str, str]]], words: int, streams: int,
                 rounds: int) -> dict[str, list[float]]:
    """TTFT in ms of `streams` sequential streams per path and round, the paths taking turns; every body new."""
    ttfts: dict[str, list[float]] = {name: [] for name in targets}
    salt = 0

    async def one(name: str) -> float:
        nonlocal salt
        salt += 1
        server, headers = targets[name]
        route, body, base = request_of("openai", words, salt)
        result = await stream(server.url, route, body, {**base, **headers})
        if result.status != 200 or result.words != words:
            raise RuntimeError(f"{name}: status {result.status}, {result.words} of {words} deltas "
                               f"(log: {server.log_path})")
        return result.ttft_s * 1000

    async def main() -> None:
        for name in targets:  # warm-up: first connections, LiteLLM's first streamed request
            for _ in range(3):
                await one(name)
        for turn in range(rounds):
            names = list(targets)
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                ttfts[name] += [await one(name) for _ in range(streams)]

    trio.run(main)
    return ttfts


def run(executable: str, duration_s: float, rounds: int, words: int = 50, streams: int = 20) -> list[Table]:
    body = dumps({**REQUEST, "model": "good"})
    no_cache = {**HEADERS, "X-Daari-No-Cache": "true"}
    litellm_headers = {**HEADERS, "Authorization": f"Bearer {MASTER_KEY}"}
    runs: dict[tuple[str, int], list[Measured]] = {}
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, \
            daari(proxy_config(upstream.url), tmp) as proxy, \
            daari(on_h11(proxy_config(upstream.url)), tmp) as proxy_h11, \
            daari(daari_config(tier_of(upstream, "openai")), tmp) as streamer, \
            daari(on_h11(daari_config(tier_of(upstream, "openai"))), tmp) as streamer_h11, \
            litellm(executable, upstream.url, tmp, cache=True) as cached, \
            litellm(executable, upstream.url, tmp, cache=False) as uncached:
        hit_body, hit_headers = warm_hit(proxy)
        warm_hit(proxy_h11)
        with bare_app(hit_body, hit_headers, tmp) as bare, \
                bare_app(hit_body, hit_headers, tmp, module="bench.bare_h11") as bare_h11:
            paths: dict[str, tuple[Server, bytes, dict[str, str]]] = {
                "upstream directly": (upstream, body, HEADERS),
                "bare Hypercorn-trio app (fixed body)": (bare, dumps(REQUEST), HEADERS),
                "bare h11-on-Trio server, no ASGI (fixed body)": (bare_h11, dumps(REQUEST), HEADERS),
                "daari L0 hit": (proxy, dumps(REQUEST), HEADERS),
                "daari L0 hit (h11 front end)": (proxy_h11, dumps(REQUEST), HEADERS),
                "LiteLLM, cache hit": (cached, body, litellm_headers),
                "daari pass-through (X-Daari-No-Cache)": (proxy, body, no_cache),
                "daari pass-through (h11 front end)": (proxy_h11, body, no_cache),
                "LiteLLM, pass-through": (uncached, body, litellm_headers),
            }
            with httpx.Client(timeout=120) as client:  # LiteLLM's first request takes seconds: one at a time first
                for server, content, headers in paths.values():
                    for _ in range(3):
                        client.post(server.url + PATH, content=content, headers=headers).raise_for_status()
            for server, content, headers in paths.values():  # warm: connections, caches filled
                measure(server, PATH, content, headers, connections=20, duration_s=WARMUP_S)
            names = list(paths)
            for turn in range(rounds):
                order = names[turn % len(names):] + names[:turn % len(names)]
                for connections in CONNECTIONS:
                    for name in order:
                        server, content, headers = paths[name]
                        runs.setdefault((name, connections), []).append(measure(
                            server, PATH, content, headers, connections=connections, duration_s=duration_s))
        ttfts = stream_ttfts(dict(zip(TTFT_PATHS, [(upstream, {}), (streamer, NO_CACHE), (streamer_h11, NO_CACHE),
                                                   (uncached, {"Authorization": f"Bearer {MASTER_KEY}"})],
                                      strict=True)), words, streams, rounds)

    def med(name: str, connections: int, what: str) -> float:
        return statistics.median(getattr(m.load, what) for m in runs[(name, connections)])

    table = Table(f"daari and its peers, one worker each, same upstream and client (medians of {rounds} turns)",
                  ["path", "1 conn p50 ms", "1 conn p99 ms", "1 conn req/s", "20 conns req/s"])
    for name in dict.fromkeys(n for n, _ in runs):
        table.add(name, med(name, 1, "p50_ms"), med(name, 1, "p99_ms"), med(name, 1, "rps"), med(name, 20, "rps"))
    table.notes += [f"client: {tool_name()} (1 thread), {duration_s:g} s per row after a {WARMUP_S:g} s warm-up; "
                    f"LiteLLM from {executable}; {machine()}"]
    streamed = Table(f"Streaming TTFT, {words}-delta answers, one stream at a time ({streams} x {rounds} each)",
                     ["path", "TTFT p50 ms", "TTFT p99 ms", "added p50 ms"])
    direct = statistics.median(ttfts["upstream directly"])
    for name, values in ttfts.items():
        ordered = sorted(values)
        streamed.add(name, statistics.median(values), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
                     statistics.median(values) - direct)
    verdict = Table("Issue 23's peer targets (same run)", ["measure", "measured", "target"])
    verdict.add("daari L0 hit / bare app, req/s at 20 conns",
                ratio(med("daari L0 hit", 20, "rps"), med("bare Hypercorn-trio app (fixed body)", 20, "rps")),
                ">= 0.95x")
    verdict.add("bare Hypercorn app / bare h11 server, req/s at 20 conns (the front end's share)",
                ratio(med("bare Hypercorn-trio app (fixed body)", 20, "rps"),
                      med("bare h11-on-Trio server, no ASGI (fixed body)", 20, "rps")), "")
    verdict.add("daari L0 hit / LiteLLM cache hit, req/s at 20 conns",
                ratio(med("daari L0 hit", 20, "rps"), med("LiteLLM, cache hit", 20, "rps")), ">= 20x")
    verdict.add("daari pass-through / LiteLLM pass-through, req/s at 20 conns",
                ratio(med("daari pass-through (X-Daari-No-Cache)", 20, "rps"), med("LiteLLM, pass-through", 20, "rps")),
                ">= 10x")
    added = med("daari pass-through (X-Daari-No-Cache)", 1, "p50_ms") - med("upstream directly", 1, "p50_ms")
    verdict.add("daari pass-through added p50 at 1 conn", f"{added:.2f} ms", "<= 1 ms")
    verdict.add("daari streaming added TTFT p50", f"{statistics.median(ttfts['daari pass-through']) - direct:.2f} ms",
                "<= 1 ms")
    _h11_rows(verdict, med, ttfts, direct)
    verdict.add("daari streaming TTFT / LiteLLM's, p50",
                ratio(statistics.median(ttfts["daari pass-through"]), statistics.median(ttfts["LiteLLM pass-through"])),
                "")
    return [table, streamed, verdict]


def _h11_rows(verdict: Table, med: Any, ttfts: dict[str, list[float]], direct: float) -> None:
    """The same targets with daari on its h11 front end (`server.front_end: h11`), and what it gains."""
    hit, passing = "daari L0 hit (h11 front end)", "daari pass-through (h11 front end)"
    verdict.add("h11 front end: daari L0 hit / bare Hypercorn app, req/s at 20 conns",
                ratio(med(hit, 20, "rps"), med("bare Hypercorn-trio app (fixed body)", 20, "rps")), ">= 0.95x")
    verdict.add("h11 front end: daari L0 hit / bare h11 server, req/s at 20 conns",
                ratio(med(hit, 20, "rps"), med("bare h11-on-Trio server, no ASGI (fixed body)", 20, "rps")), "")
    verdict.add("h11 front end: daari L0 hit / LiteLLM cache hit, req/s at 20 conns",
                ratio(med(hit, 20, "rps"), med("LiteLLM, cache hit", 20, "rps")), ">= 20x")
    verdict.add("h11 front end: daari pass-through / LiteLLM pass-through, req/s at 20 conns",
                ratio(med(passing, 20, "rps"), med("LiteLLM, pass-through", 20, "rps")), ">= 10x")
    verdict.add("h11 front end / Hypercorn: daari L0 hit req/s at 20 conns",
                ratio(med(hit, 20, "rps"), med("daari L0 hit", 20, "rps")), "")
    verdict.add("h11 front end / Hypercorn: daari pass-through req/s at 20 conns",
                ratio(med(passing, 20, "rps"), med("daari pass-through (X-Daari-No-Cache)", 20, "rps")), "")
    added = med(passing, 1, "p50_ms") - med("upstream directly", 1, "p50_ms")
    verdict.add("h11 front end: daari pass-through added p50 at 1 conn", f"{added:.2f} ms", "<= 1 ms")
    verdict.add("h11 front end: daari streaming added TTFT p50",
                f"{statistics.median(ttfts['daari pass-through (h11 front end)']) - direct:.2f} ms", "<= 1 ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--litellm", default="bench/.peers/venv/bin/litellm", help="LiteLLM's proxy executable")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured row")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--words", type=int, default=50, help="deltas per streamed answer (TTFT rows)")
    parser.add_argument("--streams", type=int, default=20, help="streams per path and round (TTFT rows)")
    args = parser.parse_args()
    if not Path(args.litellm).exists():
        raise SystemExit(f"{args.litellm} not found: `make bench-peers` installs LiteLLM under bench/.peers/")
    print_tables(run(args.litellm, args.duration, args.rounds, args.words, args.streams))


if __name__ == "__main__":
    main()
