"""`make bench-peers` (`python -m bench.peers`): daari beside LiteLLM's proxy and Portkey's gateway, one run.

Every server is its own process on 127.0.0.1 with one worker, in front of the same fake upstream
(tests/fakes/openai_upstream.py on Hypercorn, model "good"), measured by the same load client (wrk when present)
at 1 and 20 connections, the paths taking turns `--rounds` times (medians):

- the upstream directly, and a bare Hypercorn-trio app answering daari's hit bytes (what a Python server costs),
  and the same bytes from bench/bare_h11.py (h11 over Trio sockets, no Hypercorn: what the front end costs);
- a cache hit: daari's L0 (the same request again) and LiteLLM with its in-memory cache (`cache_params: local`);
  Portkey's too when its build answers `x-portkey-cache-status: HIT` to a repeated request asking for its simple
  cache (the npm build does not: the table says so);
- pass-through: daari with `X-Daari-No-Cache: true`, LiteLLM without a cache, Portkey (no cache asked for);
- daari's hit, pass-through and TTFT rows again with `server.front_end: h11` (its own h11 front end);
- streaming TTFT: the time to the first content delta of a streamed answer (the fake's "long" model, `--words`
  deltas), one stream at a time over a new connection, directly, through daari (cache off) and through each peer
  (no cache), the paths taking turns (bench/stream_relay.py's raw-socket client).

The peers are installed by `make bench-peers` under bench/.peers/ (ignored by git; the one step that needs the
network): LiteLLM into its own virtualenv (never daari's), Portkey's gateway (npm `@portkey-ai/gateway`) with npm
into bench/.peers/portkey/, run by node (`build/start-server.js --port=N --headless`, held to 127.0.0.1 by a
preload: the script listens on every interface), each request naming its provider and the fake upstream in
Portkey's headers (`x-portkey-provider: openai`, `x-portkey-custom-host`). A peer that is not installed, or
turned off (`--no-litellm`, `--no-portkey`), is skipped with a printed reason. No key: the fake takes any.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import shutil
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
LITELLM_DEFAULT = "bench/.peers/venv/bin/litellm"
PORTKEY_DEFAULT = "bench/.peers/portkey/node_modules/@portkey-ai/gateway/build/start-server.js"
# Portkey's start script calls `serve({port})` with no hostname, so node would listen on every interface: this
# preload (node --require) gives a bare-port listen() the loopback address instead.
LOOPBACK_PRELOAD = """\
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && (args[1] === undefined || typeof args[1] === 'function')) {
    args.splice(1, args[1] === undefined ? 1 : 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
"""
PORTKEY_CACHE = json.dumps({"cache": {"mode": "simple"}})  # what Portkey's docs ask for in x-portkey-config


@dataclass
class Peers:
    """Which peers run: the LiteLLM executable, Portkey's start script and node, or None with why not."""

    litellm: str | None
    portkey: str | None
    node: str
    skipped: list[str]


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


@contextlib.contextmanager
def portkey(node: str, script: str, log_dir: Path) -> Iterator[Server]:
    """Portkey's gateway on node, one process (`--headless`: no console UI routes), no config file: every request
    names its provider and base URL in headers (portkey_headers)."""
    port = free_port()
    preload = log_dir / "loopback.cjs"
    preload.write_text(LOOPBACK_PRELOAD)
    process, log_path = _spawn(f"portkey-{port}", [node, "--require", str(preload), str(Path(script).resolve()),
                                                   f"--port={port}", "--headless"], log_dir, None)
    server = Server("portkey", f"http://{HOST}:{port}", process, log_path)
    try:
        _wait_http(server, "/", 60)  # "AI Gateway says hey!"
        yield server
    finally:
        stop(server)


def portkey_headers(upstream_url: str) -> dict[str, str]:
    """Portkey's OpenAI provider sent to the fake upstream (a loopback custom host is on its default trust list)."""
    return {"x-portkey-provider": "openai", "x-portkey-custom-host": upstream_url + "/v1",
            "Authorization": "Bearer sk-fake"}


def portkey_cache_status(server: Server, body: bytes, headers: dict[str, str]) -> str:
    """`x-portkey-cache-status` of the second of two identical requests that ask for Portkey's simple cache."""
    status = "no answer"
    with httpx.Client(timeout=30) as client:
        for _ in range(2):
            response = client.post(server.url + PATH, content=body,
                                   headers={**headers, "x-portkey-config": PORTKEY_CACHE})
            response.raise_for_status()
            status = response.headers.get("x-portkey-cache-status", "absent")
    return status


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
        for name in targets:  # warm-up: first connections, a peer's first streamed request
            for _ in range(3):
                await one(name)
        for turn in range(rounds):
            names = list(targets)
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                ttfts[name] += [await one(name) for _ in range(streams)]

    trio.run(main)
    return ttfts


def run(peers: Peers, duration_s: float, rounds: int, words: int = 50, streams: int = 20) -> list[Table]:
    body = dumps({**REQUEST, "model": "good"})
    no_cache = {**HEADERS, "X-Daari-No-Cache": "true"}
    litellm_headers = {**HEADERS, "Authorization": f"Bearer {MASTER_KEY}"}
    runs: dict[tuple[str, int], list[Measured]] = {}
    portkey_cache = ""
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(workdir())
        upstream = stack.enter_context(fake_upstream("openai", tmp))
        proxy = stack.enter_context(daari(proxy_config(upstream.url), tmp))
        proxy_h11 = stack.enter_context(daari(on_h11(proxy_config(upstream.url)), tmp))
        streamer = stack.enter_context(daari(daari_config(tier_of(upstream, "openai")), tmp))
        streamer_h11 = stack.enter_context(daari(on_h11(daari_config(tier_of(upstream, "openai"))), tmp))
        hit_body, hit_headers = warm_hit(proxy)
        warm_hit(proxy_h11)
        bare = stack.enter_context(bare_app(hit_body, hit_headers, tmp))
        bare_h11 = stack.enter_context(bare_app(hit_body, hit_headers, tmp, module="bench.bare_h11"))
        paths: dict[str, tuple[Server, bytes, dict[str, str]]] = {
            "upstream directly": (upstream, body, HEADERS),
            "bare Hypercorn-trio app (fixed body)": (bare, dumps(REQUEST), HEADERS),
            "bare h11-on-Trio server, no ASGI (fixed body)": (bare_h11, dumps(REQUEST), HEADERS),
            "daari L0 hit": (proxy, dumps(REQUEST), HEADERS),
            "daari L0 hit (h11 front end)": (proxy_h11, dumps(REQUEST), HEADERS),
            "daari pass-through (X-Daari-No-Cache)": (proxy, body, no_cache),
            "daari pass-through (h11 front end)": (proxy_h11, body, no_cache),
        }
        ttft_targets: dict[str, tuple[Server, dict[str, str]]] = {
            "upstream directly": (upstream, {}), "daari pass-through": (streamer, NO_CACHE),
            "daari pass-through (h11 front end)": (streamer_h11, NO_CACHE)}
        if peers.litellm:
            cached = stack.enter_context(litellm(peers.litellm, upstream.url, tmp, cache=True))
            uncached = stack.enter_context(litellm(peers.litellm, upstream.url, tmp, cache=False))
            paths["LiteLLM, cache hit"] = (cached, body, litellm_headers)
            paths["LiteLLM, pass-through"] = (uncached, body, litellm_headers)
            ttft_targets["LiteLLM pass-through"] = (uncached, {"Authorization": f"Bearer {MASTER_KEY}"})
        if peers.portkey:
            gateway = stack.enter_context(portkey(peers.node, peers.portkey, tmp))
            to_fake = portkey_headers(upstream.url)
            portkey_cache = portkey_cache_status(gateway, body, {**HEADERS, **to_fake})
            if portkey_cache == "HIT":
                paths["Portkey, cache hit"] = (gateway, body, {**HEADERS, **to_fake,
                                                               "x-portkey-config": PORTKEY_CACHE})
            paths["Portkey, pass-through"] = (gateway, body, {**HEADERS, **to_fake})
            ttft_targets["Portkey pass-through"] = (gateway, to_fake)
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
        ttfts = stream_ttfts(ttft_targets, words, streams, rounds)

    def med(name: str, connections: int, what: str) -> float:
        return float(statistics.median(getattr(m.load, what) for m in runs[(name, connections)]))

    def cpu(name: str) -> float:
        """The server's CPU per request at 20 connections: less swayed by the other work on the cores than req/s."""
        return float(statistics.median(m.cpu_us_per_request for m in runs[(name, 20)]))

    table = Table(f"daari and its peers, one worker each, same upstream and client (medians of {rounds} turns)",
                  ["path", "1 conn p50 ms", "1 conn p99 ms", "1 conn req/s", "20 conns req/s",
                   "20 conns server CPU us/req"])
    for name in dict.fromkeys(n for n, _ in runs):
        table.add(name, med(name, 1, "p50_ms"), med(name, 1, "p99_ms"), med(name, 1, "rps"), med(name, 20, "rps"),
                  cpu(name))
    if peers.portkey and portkey_cache != "HIT":
        table.add("Portkey, cache hit", f"none: x-portkey-cache-status {portkey_cache}", "", "", "", "")
        table.notes.append("Portkey's npm build has no response cache: its in-memory cache middleware is compiled "
                           "out (conf.json `cache: false` at build time), so a repeated request asking for "
                           f"`x-portkey-config: {PORTKEY_CACHE}` is answered `x-portkey-cache-status: "
                           f"{portkey_cache}` and goes upstream")
    table.notes += [f"client: {tool_name()} (1 thread), {duration_s:g} s per row after a {WARMUP_S:g} s warm-up; "
                    f"LiteLLM from {peers.litellm or '(skipped)'}; Portkey from {peers.portkey or '(skipped)'}; "
                    f"{machine()}", *peers.skipped]
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
    if peers.litellm:
        verdict.add("daari L0 hit / LiteLLM cache hit, req/s at 20 conns",
                    ratio(med("daari L0 hit", 20, "rps"), med("LiteLLM, cache hit", 20, "rps")), ">= 20x")
        verdict.add("daari pass-through / LiteLLM pass-through, req/s at 20 conns",
                    ratio(med("daari pass-through (X-Daari-No-Cache)", 20, "rps"),
                          med("LiteLLM, pass-through", 20, "rps")), ">= 10x")
    added = med("daari pass-through (X-Daari-No-Cache)", 1, "p50_ms") - med("upstream directly", 1, "p50_ms")
    verdict.add("daari pass-through added p50 at 1 conn", f"{added:.2f} ms", "<= 1 ms")
    verdict.add("daari streaming added TTFT p50", f"{statistics.median(ttfts['daari pass-through']) - direct:.2f} ms",
                "<= 1 ms")
    _h11_rows(verdict, med, ttfts, direct, litellm=bool(peers.litellm))
    if peers.litellm:
        verdict.add("daari streaming TTFT / LiteLLM's, p50",
                    ratio(statistics.median(ttfts["daari pass-through"]),
                          statistics.median(ttfts["LiteLLM pass-through"])), "")
    if peers.portkey:
        _portkey_rows(verdict, med, cpu, ttfts, portkey_cache)
    return [table, streamed, verdict]


def _h11_rows(verdict: Table, med: Callable[[str, int, str], float], ttfts: dict[str, list[float]], direct: float,
              *, litellm: bool) -> None:
    """The same targets with daari on its h11 front end (`server.front_end: h11`), and what it gains."""
    hit, passing = "daari L0 hit (h11 front end)", "daari pass-through (h11 front end)"
    verdict.add("h11 front end: daari L0 hit / bare Hypercorn app, req/s at 20 conns",
                ratio(med(hit, 20, "rps"), med("bare Hypercorn-trio app (fixed body)", 20, "rps")), ">= 0.95x")
    verdict.add("h11 front end: daari L0 hit / bare h11 server, req/s at 20 conns",
                ratio(med(hit, 20, "rps"), med("bare h11-on-Trio server, no ASGI (fixed body)", 20, "rps")), "")
    if litellm:
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


def _portkey_rows(verdict: Table, med: Callable[[str, int, str], float], cpu: Callable[[str], float],
                  ttfts: dict[str, list[float]], cache: str) -> None:
    """daari against Portkey's gateway: the cache hit when its build has one, pass-through at 1 and 20
    connections on both of daari's front ends, and streamed TTFT. Issue 23 names no target against Portkey."""
    peer = "Portkey, pass-through"
    if cache == "HIT":
        verdict.add("daari L0 hit / Portkey cache hit, req/s at 20 conns",
                    ratio(med("daari L0 hit", 20, "rps"), med("Portkey, cache hit", 20, "rps")), "")
    else:
        verdict.add("daari L0 hit / Portkey cache hit", f"no cache in Portkey's npm build ({cache})", "")
    for front_end, daari_path in (("Hypercorn", "daari pass-through (X-Daari-No-Cache)"),
                                  ("h11 front end", "daari pass-through (h11 front end)")):
        for connections in CONNECTIONS:
            verdict.add(f"{front_end}: daari pass-through / Portkey pass-through, req/s at {connections} "
                        f"conn{'s' if connections > 1 else ''}",
                        ratio(med(daari_path, connections, "rps"), med(peer, connections, "rps")), "")
    verdict.add("Portkey / daari (Hypercorn) server CPU per pass-through request at 20 conns",
                ratio(cpu(peer), cpu("daari pass-through (X-Daari-No-Cache)")), "")
    added = med(peer, 1, "p50_ms") - med("upstream directly", 1, "p50_ms")
    verdict.add("Portkey pass-through added p50 at 1 conn", f"{added:.2f} ms", "")
    for name in ("daari pass-through", "daari pass-through (h11 front end)"):
        verdict.add(f"{name}: streaming TTFT / Portkey's, p50",
                    ratio(statistics.median(ttfts[name]), statistics.median(ttfts["Portkey pass-through"])), "")


def peers_of(args: argparse.Namespace) -> Peers:
    """The peers this run can start; each one missing or turned off is skipped with the reason printed."""
    skipped: list[str] = []
    litellm_path: str | None = None
    if args.no_litellm:
        skipped.append("LiteLLM skipped: --no-litellm")
    elif not Path(args.litellm).exists():
        skipped.append(f"LiteLLM skipped: {args.litellm} not found (`make bench-peers` installs it)")
    else:
        litellm_path = args.litellm
    portkey_path: str | None = None
    if args.no_portkey:
        skipped.append("Portkey skipped: --no-portkey")
    elif not Path(args.portkey).exists():
        skipped.append(f"Portkey skipped: {args.portkey} not found (`make bench-peers` installs it with npm)")
    elif shutil.which(args.node) is None:
        skipped.append(f"Portkey skipped: no {args.node} on PATH (it needs node >= 18)")
    else:
        portkey_path = args.portkey
    for reason in skipped:
        print(reason, flush=True)
    return Peers(litellm_path, portkey_path, args.node, skipped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--litellm", default=LITELLM_DEFAULT, help="LiteLLM's proxy executable")
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM out")
    parser.add_argument("--portkey", default=PORTKEY_DEFAULT, help="Portkey's build/start-server.js")
    parser.add_argument("--no-portkey", action="store_true", help="leave Portkey out")
    parser.add_argument("--node", default="node", help="the node that runs Portkey")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured row")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--words", type=int, default=50, help="deltas per streamed answer (TTFT rows)")
    parser.add_argument("--streams", type=int, default=20, help="streams per path and round (TTFT rows)")
    args = parser.parse_args()
    print_tables(run(peers_of(args), args.duration, args.rounds, args.words, args.streams))


if __name__ == "__main__":
    main()
