"""`python -m bench.org_hit`: the org cache (docs/redis.md, "Org cache"). A hit's latency read from the local disk,
from a team Redis (cache.backend: redis) and from the org cache (L0-org), as ratios from one run; a paraphrase's
hit from the local L1 vs from L1-org (ratio); and one workload over one daari vs three daari on one org cache at 20
connections (hit rate, req/s; bench/round_robin.py).

Everything real: a redis-server on loopback, `daari org-cache serve` and every daari as subprocesses, a fake OpenAI
upstream. Latency: each round stores `--prompts` fresh requests, then asks each once more, one at a time, of
- disk: `cache.l0.memory_mb: 0`, so the hit is read from SQLite;
- redis: `cache.backend: redis`, `memory_mb: 0`, so the hit is a Redis GET;
- org: a second daari with an empty cache whose org cache (same team) holds what the first one stored: an L0-org
  hit (a GET as the tenant's Redis user, then the copy into its local L0).
L1: `--l1-prompts` paraphrases ("how can i ... " of a stored "How do I ...?") asked of a daari (L1 on, no org
cache) that stored the originals, and of a fresh daari of the team whose L1-org index holds what a third daari
stored; only hits are timed. The L1 daari load the embedding model (cache.l1), so run it with HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.l0_hit import HEADERS, PATH, REQUEST
from bench.redis_hit import config, running_redis, started
from bench.report import Table, print_tables, ratio
from bench.round_robin import drive, shuffled_work
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


def ask_timed(url: str, bodies: list[bytes]) -> list[tuple[float, str]]:
    """Each body once, one at a time: its latency (ms) and the tier that answered."""
    timed: list[tuple[float, str]] = []
    with httpx.Client(timeout=30) as client:
        for data in bodies:
            started_at = time.perf_counter()
            response = client.post(url + PATH, content=data, headers=HEADERS)
            elapsed = (time.perf_counter() - started_at) * 1000
            response.raise_for_status()
            timed.append((elapsed, response.headers.get("x-daari-tier", "?")))
    return timed


def ask_each(url: str, bodies: list[bytes]) -> tuple[list[float], dict[str, int]]:
    """Each body once, one at a time: the latencies (ms) and how many answers each tier gave."""
    timed = ask_timed(url, bodies)
    return [ms for ms, _ in timed], dict(Counter(tier for _, tier in timed))


def wait_org_keys(redis_cli: Any, count: int, kind: str = "l0") -> None:
    """Until the team holds `count` org entries of `kind` ("l0", or "l1:e": L1-org entries)."""
    deadline = time.monotonic() + 30
    while len([k for k in redis_cli("--scan", "--pattern", f"t:{TEAM}:{kind}:*").splitlines() if k]) < count:
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


# Stored prompt, then the paraphrase asked later: another L0 key (case, words, punctuation), the same question.
TOPICS = ["list the running Docker containers", "undo the last git commit", "find the largest files on Linux",
          "rename a local git branch", "show which process listens on a port", "count the lines of a file",
          "delete a remote git branch", "show the disk usage of a folder"]


def stored_prompt(tag: str, i: int) -> bytes:
    topic = TOPICS[i % len(TOPICS)]
    return dumps({**REQUEST, "messages": [{"role": "user", "content": f"How do I {topic} in project {tag}{i}?"}]})


def paraphrase(tag: str, i: int) -> bytes:
    topic = TOPICS[i % len(TOPICS)]
    return dumps({**REQUEST, "messages": [{"role": "user", "content": f"how can i {topic} in project {tag}{i}"}]})


def l1_config(upstream_url: str, service_url: str | None, redis_url: str) -> dict[str, Any]:
    cfg = org_config(upstream_url, service_url, redis_url) if service_url else config(upstream_url, "disk", redis_url)
    cfg["cache"]["l1"] = {"enabled": True}
    return cfg


def l1_org_ready(url: str) -> None:
    """Until the daari's L1-org index has loaded the team's stream (a lookup before that is a miss at once)."""
    deadline = time.monotonic() + 60
    with httpx.Client(timeout=30) as client:
        for n in range(10**6):
            response = client.post(url + PATH, content=dumps({**REQUEST, "messages": [
                {"role": "user", "content": f"is the index ready, take {n}?"}]}), headers=HEADERS)
            response.raise_for_status()
            if response.json()["daari_meta"].get("l1_org") != "index_loading":
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the L1-org index did not load")
            time.sleep(0.2)


def l1_latency(tmp: Path, upstream_url: str, redis: Any, service_url: str, prompts: int,
               rounds: int) -> list[Table]:
    """A paraphrase's L1 hit on a daari that stored the answer itself (local L1) vs on a daari of the team whose
    local L1 is empty and whose L1-org index holds what another daari stored (the L0-org GET and the local L1 search
    miss first, then the team index's search, the entry read as the tenant's Redis user, the local verifier)."""
    found: dict[str, list[float]] = {"L1": [], "L1-org": []}
    p50s: dict[str, list[float]] = {"L1": [], "L1-org": []}
    with started(l1_config(upstream_url, None, redis.url), tmp) as local:
        with started(l1_config(upstream_url, service_url, redis.url), tmp) as writer:
            for n in range(rounds):
                ask_each(local.url, [stored_prompt(f"l{n}-", i) for i in range(prompts)])
                ask_each(writer.url, [stored_prompt(f"o{n}-", i) for i in range(prompts)])
            wait_org_keys(redis.cli, rounds * prompts, "l1:e")
        with started(l1_config(upstream_url, service_url, redis.url), tmp) as reader:
            l1_org_ready(reader.url)
            for n in range(rounds):  # taking turns: other load on the machine falls on both alike
                for level, server, tag in (("L1", local, f"l{n}-"), ("L1-org", reader, f"o{n}-")):
                    timed = ask_timed(server.url, [paraphrase(tag, i) for i in range(prompts)])
                    hit_times = [ms for ms, tier in timed if tier == level]
                    if not hit_times:
                        raise RuntimeError(f"no {level} hit among {Counter(tier for _, tier in timed)}")
                    found[level] += hit_times
                    p50s[level].append(statistics.median(hit_times))
    table = Table(f"A paraphrase answered by L1: from this daari's own L1 vs from L1-org ({prompts} paraphrases a "
                  f"round, one at a time, median of {rounds} rounds)", ["hit from", "hits", "asked", "p50 ms"])
    for level in p50s:
        table.add(level, len(found[level]), prompts * rounds, statistics.median(p50s[level]))
    table.notes.append("p50 of the hits (a paraphrase the verifier rejects goes to the upstream and is left out); "
                       "every hit embeds the paraphrase, searches and verifies; an L1-org hit's daari asked L0-org "
                       "and its own L1 first")
    ratios = Table("L1-org vs local L1 (p50, same run)", ["measure", "value"])
    ratios.add("L1-org hit / local L1 hit", ratio(statistics.median(p50s["L1-org"]), statistics.median(p50s["L1"])))
    return [table, ratios]


def several(tmp: Path, upstream_url: str, redis_url: str, service_url: str, *, prompts: int = 60, repeats: int = 3,
            workers: int = 20) -> Table:
    """The same workload (each of `prompts` requests `repeats` times, shuffled, round-robin over the instances,
    `workers` at a time) over one daari, three with their own disk caches, and three on one org cache."""
    work = shuffled_work(prompts, repeats, seed=11)

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
            hits, rps = drive(urls, work, partial(body, f"w{n}"), workers)
        table.add(name, len(work), hits, len(work) - hits, f"{hits / len(work):.0%}", rps)
    table.notes.append(f"at best {len(work) - prompts} hits: each distinct request misses once; an org write is "
                       "in the background, so a request another instance answered a moment ago may still miss")
    return table


def run(prompts: int, rounds: int, l1_prompts: int) -> list[Table]:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server not found: apt-get install redis-server (Debian) to run this bench")
    os.environ["DAARI_ORG_TOKEN"] = TOKEN  # the daari subprocesses inherit it (cache.org.token_env's default)
    with workdir() as tmp, ExitStack() as stack:
        redis = stack.enter_context(running_redis(tmp / "redis"))
        service = stack.enter_context(org_service(tmp, redis.url))
        upstream = stack.enter_context(fake_upstream("openai", tmp, cores=client_cores()))
        tables = hit_latency(tmp, upstream.url, redis, service.url, prompts, rounds)
        tables += l1_latency(tmp, upstream.url, redis, service.url, l1_prompts, rounds)
        with fake_upstream("openai", tmp, token_delay_s=0.005, cores=client_cores()) as slow:
            tables.append(several(tmp, slow.url, redis.url, service.url))
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=150, help="distinct hits measured per round and level")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (the median is shown)")
    parser.add_argument("--l1-prompts", type=int, default=40, help="paraphrases measured per round and L1 level")
    args = parser.parse_args()
    print_tables(run(args.prompts, args.rounds, args.l1_prompts))


if __name__ == "__main__":
    main()
