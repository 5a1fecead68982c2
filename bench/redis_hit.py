"""`python -m bench.redis_hit`: the L0 hit path with cache.backend disk vs redis, the L1 stream's lag, and the
cost of Redis being down. One run, one client, ratios (docs/performance.md, "Redis backend").

Four daari run side by side against the same fake OpenAI upstream and, for `redis`, a real redis-server (Debian's
package) on a free loopback port; they take turns under the load client (`--rounds`, median shown), so other load
on the machine falls on all of them alike. Two kinds of hit:
- memory: the entry is in this daari's in-memory L0 front (the usual case: an answer it stored or read before);
  the backend is not asked at all, so disk and Redis should match.
- store: `cache.l0.memory_mb: 0`, so every hit reads the backend (SQLite, or a Redis GET): what a hit costs on an
  answer another daari stored, or one that fell out of this daari's memory.
Then: the lag from an L1 put on one link to a follower on another seeing it in the stream (what an index over
the shared vectors trails by); a Redis GET through coredis vs a bare socket; one workload over one daari, three
daari with their own disk caches, and three daari on one Redis (hits and upstream calls); and Redis stopped
mid-run (every request is bypassed to the upstream) vs the cache turned off.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import trio

from bench.l0_hit import HEADERS, PATH, REQUEST, WARMUP_S, proxy_config, warm_hit
from bench.load import Measured, measure, tool_name
from bench.report import Table, fmt, print_tables, ratio
from bench.round_robin import drive, shuffled_work
from bench.servers import (
    Server,
    client_cores,
    daari,
    dumps,
    fake_upstream,
    placement,
    server_core,
    stop,
    workdir,
)
from daari.cache.l1_redis import RedisL1
from daari.cache.redis_link import LinkSettings, RedisLink
from daari.cache.store import NewL1Entry
from daari.protocol.chat import Completion
from daari.semantic.minilm import DIMENSIONS
from tests.redis_server import RedisServer

LAG_PUTS = 200
OFF = "cache off"
DOWN = "redis down: bypassed"
CONTEXT = "0" * 64  # a lookup context id (hex digest)


def config(upstream_url: str, backend: str, redis_url: str, *, memory: bool = True,
           l0: bool = True) -> dict[str, Any]:
    cache: dict[str, Any] = {"backend": backend, "l1": {"enabled": False},
                             "l0": {"enabled": l0, **({} if memory else {"memory_mb": 0})}}
    if backend == "redis":
        cache["redis"] = {"url": redis_url, "key_prefix": f"bench{time.monotonic_ns()}:"}
    return {**proxy_config(upstream_url), "cache": cache}


@contextmanager
def started(cfg: dict[str, Any], tmp: Path) -> Iterator[Server]:
    with daari(cfg, tmp, cores=server_core()) as server:
        yield server


def stream_lag(url: str) -> list[float]:
    """Milliseconds from an L1 put on one link to a follower on a second link reading its stream record."""
    lags: list[float] = []

    async def main() -> None:
        one, two = RedisLink(LinkSettings(url, timeout_s=2.0)), RedisLink(LinkSettings(url, timeout_s=2.0))
        writer = RedisL1(one, "lag:", max_entries=10_000, max_age_s=3600)
        reader = RedisL1(two, "lag:", max_entries=10_000, max_age_s=3600)
        rng = np.random.default_rng(0)
        put_at: dict[int, float] = {}
        seen_at: dict[int, float] = {}  # a record can be read before its put's reply is: matched up at the end
        async with one.running(), two.running(), trio.open_nursery() as nursery:
            ready = trio.Event()

            async def follow() -> None:
                async for rows in reader.follow(""):
                    now = time.perf_counter()
                    ready.set()
                    for row_id in rows.rows.row_ids.tolist():
                        seen_at.setdefault(row_id, now)

            nursery.start_soon(follow)
            await ready.wait()
            for i in range(LAG_PUTS):
                vector = rng.normal(size=DIMENSIONS).astype(np.float32)
                started_at = time.perf_counter()
                row_id = await writer.put(NewL1Entry(CONTEXT, f"prompt {i}", vector, Completion(text="x"), "L3"))
                put_at[row_id] = started_at
                await trio.sleep(0.005)  # one put at a time: the lag of each, not of a backlog
            with trio.fail_after(30):
                while not put_at.keys() <= seen_at.keys():  # noqa: ASYNC110  (a bench: a poll is plain enough)
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        lags.extend((seen_at[row_id] - put_at[row_id]) * 1000 for row_id in put_at)

    trio.run(main)
    return lags


def client_cost(url: str, count: int = 2000, tasks: int = 20) -> dict[str, float]:
    """A 1 KB GET through coredis under Trio vs the floor: the same RESP bytes on a bare Trio socket. p50 in
    microseconds one at a time, and GETs/s with `tasks` concurrent tasks (coredis: on its multiplexed connection;
    the floor: one socket per task)."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    request = b"*2\r\n$3\r\nGET\r\n$5\r\nbench\r\n"
    found: dict[str, float] = {}

    async def raw_get(sock: trio.SocketStream) -> None:
        await sock.send_all(request)
        data = b""
        while not data.endswith(b"\r\n") or len(data) < 1024:
            data += await sock.receive_some(65536)

    async def main() -> None:
        link = RedisLink(LinkSettings(url, timeout_s=2.0))
        async with link.running():
            await link.run(lambda client: client.set("bench", b"x" * 1024))
            for name, get in (("coredis", None), ("bare socket", raw_get)):
                sockets = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(tasks)]
                try:
                    async def one(i: int, get: Any = get, sockets: list[trio.SocketStream] = sockets) -> None:
                        if get is None:
                            await link.run(lambda client: client.get("bench"))
                        else:
                            await get(sockets[i])

                    times = []
                    for _ in range(count):
                        started_at = time.perf_counter()
                        await one(0)
                        times.append(time.perf_counter() - started_at)
                    found[f"{name} GET p50 us"] = statistics.median(times) * 1e6

                    async def worker(i: int) -> None:
                        for _ in range(count // tasks * 5):
                            await one(i)

                    started_at = time.perf_counter()
                    async with trio.open_nursery() as nursery:
                        for i in range(tasks):
                            nursery.start_soon(worker, i)
                    found[f"{name} GETs/s, {tasks} tasks"] = count * 5 / (time.perf_counter() - started_at)
                finally:
                    for sock in sockets:
                        await sock.aclose()

    trio.run(main)
    return found


def shared_vs_isolated(tmp: Path, upstream_url: str, redis_url: str, *, prompts: int = 60, repeats: int = 3,
                       workers: int = 6) -> Table:
    """The same workload (each of `prompts` distinct requests `repeats` times, shuffled, spread round-robin over
    the instances, `workers` at a time) against 1 daari, 3 daari each with its own disk cache, and 3 daari on one
    Redis: hits, upstream calls and req/s."""
    work = shuffled_work(prompts, repeats, seed=7)

    def body(i: int) -> bytes:
        return dumps({**REQUEST, "messages": [{"role": "user", "content": f"What does git command number {i} do?"}]})

    table = Table(f"Several daari, one workload ({prompts} distinct requests x {repeats}, shuffled, round-robin, "
                  f"{workers} at a time; the upstream takes ~5 ms a token)",
                  ["setup", "instances", "requests", "hits", "upstream calls", "hit rate", "req/s"])
    setups = [("one daari, disk", 1, "disk"), ("three daari, each its own disk", 3, "disk"),
              ("three daari, one Redis", 3, "redis")]
    prefix = f"shared{time.monotonic_ns()}:"
    for name, count, backend in setups:
        with ExitStack() as stack:
            cfgs = [config(upstream_url, backend, redis_url) for _ in range(count)]
            for cfg in cfgs:
                if backend == "redis":
                    cfg["cache"]["redis"]["key_prefix"] = prefix
            urls = [stack.enter_context(started(cfg, tmp)).url for cfg in cfgs]
            hits, rps = drive(urls, work, body, workers)
        table.add(name, count, len(work), hits, len(work) - hits, f"{hits / len(work):.0%}", rps)
    table.notes.append(f"at best {len(work) - prompts} hits ({(len(work) - prompts) / len(work):.0%}): each distinct "
                       "request misses once; two instances that miss the same request at the same moment both call "
                       "the upstream (the second put keeps the first answer)")
    return table


def _median(runs: list[Measured], field: str) -> float:
    return float(statistics.median(getattr(m.load, field) for m in runs))


def run(duration_s: float = 3.0, rounds: int = 3) -> list[Table]:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server not found: apt-get install redis-server (Debian) to run this bench")
    body = dumps(REQUEST)
    names = [f"{backend}, {kind} hit" for backend in ("disk", "redis") for kind in ("memory", "store")]
    turns: dict[tuple[str, int], list[Measured]] = {(n, c): [] for n in [*names, OFF, DOWN] for c in (1, 20)}
    with workdir() as tmp, fake_upstream("openai", tmp, cores=client_cores()) as upstream, ExitStack() as stack:
        redis = stack.enter_context(running_redis(tmp / "redis"))
        servers: dict[str, Server] = {}
        for name in names:
            backend, kind = name.split(",")[0], name.split()[1]
            servers[name] = stack.enter_context(started(config(upstream.url, backend, redis.url,
                                                               memory=kind == "memory"), tmp))
            warm_hit(servers[name])
        for server in servers.values():
            measure(server, PATH, body, HEADERS, connections=20, duration_s=WARMUP_S)
        # The servers take turns, so that other load on the machine falls on all of them alike.
        for _ in range(rounds):
            for name, server in servers.items():
                for connections in (1, 20):
                    turns[(name, connections)].append(measure(server, PATH, body, HEADERS,
                                                              connections=connections, duration_s=duration_s))
        lags = stream_lag(redis.url)
        clients = client_cost(redis.url)
        for server in servers.values():
            stop(server)  # the next parts run without them (the stack's own stop later does nothing)
        with fake_upstream("openai", tmp, token_delay_s=0.005, cores=client_cores()) as slow:
            several = shared_vs_isolated(tmp, slow.url, redis.url)
        # Every request to these two goes to the fake upstream: the cache off, and Redis stopped.
        off = stack.enter_context(started(config(upstream.url, "disk", redis.url, l0=False), tmp))
        down = stack.enter_context(started(config(upstream.url, "redis", redis.url, memory=False), tmp))
        redis.stop()
        for server in (off, down):
            measure(server, PATH, body, HEADERS, connections=20, duration_s=WARMUP_S)
        for _ in range(rounds):
            for name, server in ((OFF, off), (DOWN, down)):
                for connections in (1, 20):
                    turns[(name, connections)].append(measure(server, PATH, body, HEADERS,
                                                              connections=connections, duration_s=duration_s))

    table = Table(f"L0 hits and bypass, cache.backend disk vs redis (median of {rounds} turns each, same client, "
                  "same run)", ["daari", "connections", "req/s", "p50 ms", "p99 ms", "server CPU us/request"])
    for (name, connections), runs in turns.items():
        table.add(name, connections, _median(runs, "rps"), _median(runs, "p50_ms"), _median(runs, "p99_ms"),
                  statistics.median(m.cpu_us_per_request for m in runs))
    table.notes += [
        f"client: {tool_name()} (1 thread), {duration_s:g} s per turn after a {WARMUP_S:g} s warm-up at 20 "
        f"connections; process placement: {placement()}; redis-server on loopback, no persistence",
        "memory hit: the entry is in daari's in-memory L0 front; store hit: cache.l0.memory_mb 0, every hit "
        f"reads SQLite or Redis; {OFF}: cache.l0.enabled false; {DOWN}: redis-server stopped, every request goes "
        "to the fake upstream",
    ]

    def p50(name: str) -> float:
        return _median(turns[(name, 1)], "p50_ms")

    def rps(name: str) -> float:
        return _median(turns[(name, 20)], "rps")

    ratios = Table("Redis vs disk (ratios of the medians above)", ["measure", "value"])
    ratios.add("store hit p50, redis / disk (1 connection)", ratio(p50("redis, store hit"), p50("disk, store hit")))
    ratios.add("store hit req/s, redis / disk (20 connections)", ratio(rps("redis, store hit"),
                                                                      rps("disk, store hit")))
    ratios.add("memory hit p50, redis / disk (1 connection)", ratio(p50("redis, memory hit"),
                                                                    p50("disk, memory hit")))
    ratios.add("memory hit req/s, redis / disk (20 connections)", ratio(rps("redis, memory hit"),
                                                                       rps("disk, memory hit")))
    ratios.add(f"{DOWN} p50 / {OFF} p50 (1 connection)", ratio(p50(DOWN), p50(OFF)))
    ratios.add("L1 stream lag p50 / p99 / max, ms", f"{fmt(statistics.median(lags))} / "
               f"{fmt(float(np.percentile(lags, 99)))} / {fmt(max(lags))} ({len(lags)} puts)")
    cost = Table("A Redis GET from Trio: coredis vs a bare socket (same redis-server, one process)",
                 ["measure", "coredis", "bare Trio socket", "coredis / bare"])
    for measure_name in ("GET p50 us", "GETs/s, 20 tasks"):
        a, b = clients[f"coredis {measure_name}"], clients[f"bare socket {measure_name}"]
        cost.add(measure_name, a, b, ratio(a, b))
    cost.notes.append("a 1 KB value; the bare socket sends the RESP bytes itself and reads to the reply's end "
                      "(no parsing): the floor for any client")
    return [table, ratios, cost, several]


@contextmanager
def running_redis(workdir: Path) -> Iterator[RedisServer]:
    server = RedisServer(workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measured turn")
    parser.add_argument("--rounds", type=int, default=3, help="turns each server takes (the median is shown)")
    args = parser.parse_args()
    print_tables(run(args.duration, args.rounds))


if __name__ == "__main__":
    main()
