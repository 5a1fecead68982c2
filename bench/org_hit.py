"""`python -m bench.org_hit`: the org cache (docs/redis.md, "Org cache"). A hit's latency read from the local disk,
from a team Redis (cache.backend: redis) and from the org cache (L0-org), as ratios from one run; and one workload
over one daari vs three daari on one org cache at 20 connections (hit rate, req/s).

Everything real: a redis-server on loopback, `daari org-cache serve` and every daari as subprocesses, a fake OpenAI
upstream. Latency: each round stores `--prompts` fresh requests, then asks each once more, one at a time, of
- disk: `cache.l0.memory_mb: 0`, so the hit is read from SQLite;
- redis: `cache.backend: redis`, `memory_mb: 0`, so the hit is a Redis GET;
- org: a second daari with an empty cache whose org cache (same team) holds what the first one stored: an L0-org
  hit (a GET as the tenant's Redis user, then the copy into its local L0).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import trio
import yaml

from bench.l0_hit import HEADERS, PATH, REQUEST
from bench.redis_hit import config, running_redis, started
from bench.report import Table, print_tables, ratio
from bench.servers import ROOT, Server, client_cores, dumps, fake_upstream, free_port, stop, workdir

TEAM = "bench"
TOKEN = "bench-org-token-" + "q" * 32


def body(tag: str, i: int) -> bytes:
    return dumps({**REQUEST, "messages": [{"role": "user", "content": f"What does git command {tag}-{i} do?"}]})


@contextmanager
def org_service(tmp: Path, redis_url: str) -> Iterator[Server]:
    port = free_port()
    path = tmp / "org-cache.yaml"
    path.write_text(yaml.safe_dump({"port": port, "data_dir": str(tmp / "org"), "redis": {"url": redis_url},
                                    "tokens": [{"name": "bench", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
                                                "tenants": [TEAM]}]}))
    log_path = tmp / "org-cache.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "daari", "org-cache", "serve", "--config", str(path)],
                                   cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = Server("org-cache", f"http://127.0.0.1:{port}", process, log_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(server.url + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"org-cache did not start:\n{server.log_tail()}") from None
                time.sleep(0.1)
        yield server
    finally:
        stop(server)


def org_config(upstream_url: str, service_url: str, redis_url: str, *, memory: bool = True) -> dict[str, Any]:
    cfg = config(upstream_url, "disk", redis_url, memory=memory)
    cfg["cache"]["org"] = {"url": service_url, "team": TEAM, "timeout_s": 1.0}
    return cfg


def ask_each(url: str, bodies: list[bytes]) -> tuple[list[float], dict[str, int]]:
    """Each body once, one at a time: the latencies (ms) and how many answers each tier gave."""
    times: list[float] = []
    tiers: dict[str, int] = {}
    with httpx.Client(timeout=30) as client:
        for data in bodies:
            started_at = time.perf_counter()
            response = client.post(url + PATH, content=data, headers=HEADERS)
            times.append((time.perf_counter() - started_at) * 1000)
            response.raise_for_status()
            tier = response.headers.get("x-daari-tier", "?")
            tiers[tier] = tiers.get(tier, 0) + 1
    return times, tiers


def wait_org_keys(redis_cli: Any, count: int) -> None:
    deadline = time.monotonic() + 30
    while len([k for k in redis_cli("--scan", "--pattern", f"t:{TEAM}:l0:*").splitlines() if k]) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the org writes did not arrive")
        time.sleep(0.05)


def hit_latency(tmp: Path, upstream_url: str, redis: Any, service_url: str, prompts: int, rounds: int) -> list[Table]:
    p50s: dict[str, list[float]] = {"disk": [], "redis": [], "org": []}
    p99s: dict[str, list[float]] = {"disk": [], "redis": [], "org": []}
    with ExitStack() as stack:
        disk = stack.enter_context(started(config(upstream_url, "disk", redis.url, memory=False), tmp))
        team_redis = stack.enter_context(started(config(upstream_url, "redis", redis.url, memory=False), tmp))
        writer = stack.enter_context(started(org_config(upstream_url, service_url, redis.url), tmp))
        for n in range(rounds):
            bodies = {name: [body(f"{name}{n}", i) for i in range(prompts)] for name in p50s}
            ask_each(disk.url, bodies["disk"])
            ask_each(team_redis.url, bodies["redis"])
            ask_each(writer.url, bodies["org"])
            wait_org_keys(redis.cli, (n + 1) * prompts)
            # A fresh daari for each round: its local cache is empty, so every hit of the round is an L0-org hit.
            with started(org_config(upstream_url, service_url, redis.url, memory=False), tmp) as reader:
                ask_each(reader.url, [body("warm", 0)])  # its tenant link is set up by now
                for name, server in (("disk", disk), ("redis", team_redis), ("org", reader)):
                    times, tiers = ask_each(server.url, bodies[name])
                    expected = "L0-org" if name == "org" else "L0"
                    if tiers.get(expected) != prompts:
                        raise RuntimeError(f"{name}: expected {prompts} {expected} hits, got {tiers}")
                    p50s[name].append(statistics.median(times))
                    p99s[name].append(sorted(times)[int(len(times) * 0.99) - 1])
    table = Table(f"A hit read from disk, a team Redis and the org cache ({prompts} distinct hits a round, one at a "
                  f"time, median of {rounds} rounds)", ["hit from", "p50 ms", "p99 ms"])
    for name in p50s:
        table.add(name, statistics.median(p50s[name]), statistics.median(p99s[name]))
    ratios = Table("Hit latency ratios (p50, same run)", ["measure", "value"])
    disk50, redis50, org50 = (statistics.median(p50s[n]) for n in ("disk", "redis", "org"))
    ratios.add("redis / disk", ratio(redis50, disk50))
    ratios.add("org (L0-org) / disk", ratio(org50, disk50))
    ratios.add("org (L0-org) / redis", ratio(org50, redis50))
    return [table, ratios]


def several(tmp: Path, upstream_url: str, redis_url: str, service_url: str, *, prompts: int = 60, repeats: int = 3,
            workers: int = 20) -> Table:
    """The same workload (each of `prompts` requests `repeats` times, shuffled, round-robin over the instances,
    `workers` at a time) over one daari, three with their own disk caches, and three on one org cache."""
    rng = random.Random(11)
    work = [i for i in range(prompts) for _ in range(repeats)]
    rng.shuffle(work)

    async def drive(urls: list[str], tag: str) -> tuple[int, float]:
        hits = 0
        queue = list(enumerate(work))
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=workers)) as client:
            async def worker() -> None:
                nonlocal hits
                while queue:
                    j, i = queue.pop(0)
                    response = await client.post(urls[j % len(urls)] + PATH, content=body(tag, i), headers=HEADERS)
                    response.raise_for_status()
                    hits += response.headers.get("x-daari-cache") == "hit"

            started_at = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for _ in range(workers):
                    nursery.start_soon(worker)
            return hits, len(work) / (time.perf_counter() - started_at)

    table = Table(f"One workload over several daari ({prompts} distinct requests x {repeats}, shuffled, round-robin, "
                  f"{workers} connections; the upstream takes ~5 ms a token)",
                  ["setup", "requests", "hits", "upstream calls", "hit rate", "req/s"])
    setups = [("one daari, disk", 1, False), ("three daari, each its own disk", 3, False),
              ("three daari, one org cache", 3, True)]
    for n, (name, count, org) in enumerate(setups):
        with ExitStack() as stack:
            cfgs = [org_config(upstream_url, service_url, redis_url) if org else config(upstream_url, "disk", redis_url)
                    for _ in range(count)]
            urls = [stack.enter_context(started(cfg, tmp)).url for cfg in cfgs]
            hits, rps = trio.run(drive, urls, f"w{n}")
        table.add(name, len(work), hits, len(work) - hits, f"{hits / len(work):.0%}", rps)
    table.notes.append(f"at best {len(work) - prompts} hits: each distinct request misses once; an org write is "
                       "in the background, so a request another instance answered a moment ago may still miss")
    return table


def run(prompts: int, rounds: int) -> list[Table]:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server not found: apt-get install redis-server (Debian) to run this bench")
    os.environ["DAARI_ORG_TOKEN"] = TOKEN  # the daari subprocesses inherit it (cache.org.token_env's default)
    with workdir() as tmp, ExitStack() as stack:
        redis = stack.enter_context(running_redis(tmp / "redis"))
        service = stack.enter_context(org_service(tmp, redis.url))
        upstream = stack.enter_context(fake_upstream("openai", tmp, cores=client_cores()))
        tables = hit_latency(tmp, upstream.url, redis, service.url, prompts, rounds)
        with fake_upstream("openai", tmp, token_delay_s=0.005, cores=client_cores()) as slow:
            tables.append(several(tmp, slow.url, redis.url, service.url))
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=150, help="distinct hits measured per round and level")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the median is shown)")
    args = parser.parse_args()
    print_tables(run(args.prompts, args.rounds))


if __name__ == "__main__":
    main()
