"""`python -m bench.soak [--minutes M] [--clients C] [--held 1000]`: a bounded soak of a daari process.

daari (`daari serve`, its own process) in front of the fake OpenAI upstream (its own process; the request's
model picks its behaviour: tests/fakes/openai_upstream.py). Phase 1, mixed traffic for M minutes from C client
threads: L0 hits, misses, streams (Chat Completions, Messages, Responses), weak answers (L3 refuses or
answers short: escalation candidates; whether daari escalates them is its routing's call), upstream faults
(500, 429, a dropped or truncated stream, malformed JSON) and clients that leave mid-stream.
Phase 2: `--held` streams opened at once and held (the upstream sends a first chunk, then waits), then released.
After each phase, once traffic stops: daari's open files, threads, event-loop tasks (/metrics) and resident
memory against the baseline taken after a warm-up. Prints the figures (docs/performance.md, "Soak"); exit
status 1 when a 500 was answered or files, threads or tasks did not come back to their baseline.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
import trio

from bench.servers import Server, daari, fake_upstream, openai_tier, workdir

HELD_TIER = {"x-daari-tier-override": "L3", "x-daari-no-cache": "true"}
# what the mix sends, by weight: most traffic is hits, misses and streams; a tenth faults and departures
MIX = {"hit": 30, "miss": 15, "stream": 15, "messages": 10, "responses": 8, "weak_answer": 7, "fault": 8,
       "disconnect": 7}
FAULTS = ["error500", "error429", "drop", "truncate", "malformed"]


def config(upstream_url: str, held: int) -> dict[str, Any]:
    """L3 without a model (the client's model name picks the fake's behaviour), L6 the fake's good answers.
    L3 takes `held` streams at once (the default, 32 plus a queue of 64, would answer the rest 503)."""
    l3 = {"executor": "openai", "base_url": upstream_url + "/v1", "max_concurrency": held + 64,
          "breaker": {"failure_threshold": 1_000_000}}
    return {"server": {"grace_period_s": 1}, "cache": {"l1": {"enabled": False}},
            "tiers": {"L3": l3, "L6": openai_tier(upstream_url, "good")}}


@dataclass
class Snapshot:
    fds: int
    threads: int
    tasks: int
    rss_mib: float
    upstream_idle: int  # of the files: daari's connections to the upstream (its pools keep some, bounded)

    def __str__(self) -> str:
        return (f"{self.fds} files ({self.upstream_idle} of them connections to the upstream), {self.threads} "
                f"threads, {self.tasks} loop tasks, {self.rss_mib:.0f} MiB RSS")


_METRICS: dict[str, httpx.Client] = {}
UPSTREAM_PORT = [0]  # the fake upstream's port, once it runs


def snapshot(server: Server) -> Snapshot:
    """daari's files, threads, loop tasks and RSS. /metrics is read over one kept-alive connection (counted in
    every snapshot alike): a connection per read would itself hold files, since Hypercorn keeps a connection
    its client closed while idle until its keep-alive timer fires (`server.header_timeout_s`, 30 s)."""
    client = _METRICS.setdefault(server.url, httpx.Client(base_url=server.url, timeout=10))
    tasks = 0
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("daari_event_loop_tasks "):
            tasks = int(float(line.split()[1]))
    ps: psutil.Process = server.ps
    upstream = sum(1 for c in ps.net_connections("tcp") if c.raddr and c.raddr.port == UPSTREAM_PORT[0])
    return Snapshot(ps.num_fds(), ps.num_threads(), tasks, ps.memory_info().rss / 2**20, upstream)


def settled(server: Server, baseline: Snapshot | None, timeout_s: float = 300) -> Snapshot:
    """The snapshot once it stops changing (and is back to `baseline`'s files, threads and tasks, if given):
    connections close a moment after their clients, worker threads idle out."""
    started = time.monotonic()
    last = snapshot(server)
    while time.monotonic() < started + timeout_s:
        time.sleep(1.0)
        now = snapshot(server)
        steady = (now.fds, now.threads, now.tasks) == (last.fds, last.threads, last.tasks)
        if steady and (baseline is None or back(now, baseline)):
            break
        last = now
    print(f"  (settled in {time.monotonic() - started:.0f} s)")
    return last


def back(now: Snapshot, baseline: Snapshot) -> bool:
    """Files (less idle upstream connections, which daari's pools keep up to their bound and close only when
    next used), threads and loop tasks no more than at the baseline. The tasks count includes the /metrics
    request that reads it, as the baseline's did."""
    return (now.fds - now.upstream_idle <= baseline.fds - baseline.upstream_idle
            and now.threads <= baseline.threads and now.tasks <= baseline.tasks)


def chat(prompt: str, model: str = "good", stream: bool = False) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": stream}


def one(client: httpx.Client, kind: str, n: int, rng: random.Random) -> int:
    """One request of `kind`; its status (0: the client left on purpose)."""
    unique = f"soak request {n}: explain item {rng.randrange(10**9)} in a sentence"
    if kind == "hit":
        return client.post("/v1/chat/completions", json=chat(f"common question {n % 20}")).status_code
    if kind == "miss":
        return client.post("/v1/chat/completions", json=chat(unique)).status_code
    if kind == "stream":
        response = client.post("/v1/chat/completions", json=chat(unique, stream=True))
        assert response.status_code != 200 or response.text.rstrip().endswith("[DONE]"), response.text[-200:]
        return response.status_code
    if kind == "messages":
        body = {"model": "good", "max_tokens": 64, "stream": n % 2 == 0,
                "messages": [{"role": "user", "content": unique}]}
        return client.post("/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}).status_code
    if kind == "responses":
        return client.post("/v1/responses", json={"model": "good", "input": unique, "stream": n % 2 == 0}).status_code
    if kind == "weak_answer":  # a refusal or a short answer from L3: what escalation judges
        return client.post("/v1/chat/completions", json=chat(unique, model=rng.choice(["refuse", "short"]))
                           ).status_code
    if kind == "fault":
        return client.post("/v1/chat/completions", json=chat(unique, model=rng.choice(FAULTS),
                                                             stream=n % 2 == 0)).status_code
    with client.stream("POST", "/v1/chat/completions", json=chat(unique, model="hang_stream", stream=True),
                       headers=HELD_TIER) as response:  # "disconnect": read the first bytes, then leave
        for _ in response.iter_bytes():
            break
    return 0


def mixed_traffic(server: Server, seconds: float, clients: int, seed: int) -> Counter[str]:
    statuses: Counter[str] = Counter()
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    kinds, weights = list(MIX), list(MIX.values())

    def client_thread(number: int) -> None:
        rng = random.Random(seed * 1000 + number)
        with httpx.Client(base_url=server.url, timeout=60) as client:
            n = number
            while time.monotonic() < stop_at:
                kind = rng.choices(kinds, weights)[0]
                try:
                    status = one(client, kind, n, rng)
                    key = f"{kind} {status}"
                except httpx.HTTPError as exc:
                    key = f"{kind} {type(exc).__name__}"
                with lock:
                    statuses[key] += 1
                n += clients

    threads = [threading.Thread(target=client_thread, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


async def hold_streams(server: Server, count: int, hold_s: float) -> tuple[int, Snapshot]:
    """Open `count` streams at once, each past its first chunk; hold them `hold_s`; the snapshot while held."""
    opened = 0
    # at most 50 connecting at once: a burst of 1,000 connects overflows the listen backlog (Hypercorn's 100),
    # which is the kernel's queue, not what is measured here
    connecting = trio.Semaphore(50)
    all_open = trio.Event()
    release = trio.Event()
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:

        async def one_stream(i: int) -> None:
            nonlocal opened
            body = chat(f"held stream {i}", model="hang_stream", stream=True)
            await connecting.acquire()
            async with client.stream("POST", "/v1/chat/completions", json=body, headers=HELD_TIER) as response:
                assert response.status_code == 200, await response.aread()
                # kept, not left with `break`: closing the iterator (a break does, once collected) closes the
                # response, and the stream would not be held
                chunks = response.aiter_bytes()
                await chunks.__anext__()
                connecting.release()
                opened += 1
                if opened == count:
                    all_open.set()
                await release.wait()
                await chunks.aclose()

        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(one_stream, i)
            with trio.fail_after(300):
                await all_open.wait()
            await trio.sleep(hold_s)
            held = await trio.to_thread.run_sync(snapshot, server)
            release.set()
    return opened, held


def run(minutes: float, clients: int, held: int, seed: int = 1) -> bool:
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, \
            daari(config(upstream.url, held), tmp) as server:
        UPSTREAM_PORT[0] = int(upstream.url.rsplit(":", 1)[1])
        rng = random.Random(seed)
        with httpx.Client(base_url=server.url, timeout=60) as client:  # warm-up: pools and stores open
            for n in range(4):  # every kind, streamed and not
                for kind in MIX:
                    one(client, kind, n, rng)
        # connections the warm-up's clients closed are held until Hypercorn's keep-alive timer fires
        # (server.header_timeout_s, 30 s: docs/operations.md, "Limits"): not part of the baseline
        time.sleep(32)
        baseline = settled(server, None)
        print(f"baseline after warm-up: {baseline}")
        started = time.monotonic()
        statuses = mixed_traffic(server, minutes * 60, clients, seed)
        elapsed = time.monotonic() - started
        during_peak = snapshot(server)
        after_mix = settled(server, baseline)
        total = sum(statuses.values())
        errors_500 = sum(n for key, n in statuses.items() if key.endswith(" 500"))
        print(f"mixed traffic: {total} requests in {elapsed:.0f} s from {clients} clients "
              f"({total / elapsed:.0f}/s); 500s: {errors_500}")
        for key, n in sorted(statuses.items()):
            print(f"  {key}: {n}")
        print(f"at the end of traffic: {during_peak}")
        print(f"settled after traffic: {after_mix}")
        opened, while_held = trio.run(hold_streams, server, held, 5.0)
        after_held = settled(server, baseline)
        print(f"{opened} streams held at once: {while_held}")
        print(f"settled after release: {after_held}")
        ok = errors_500 == 0 and back(after_mix, baseline) and back(after_held, baseline) and opened == held
        print("soak: " + ("files, threads and tasks back to their baseline; no 500" if ok else "FAILED"))
        return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--held", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    raise SystemExit(0 if run(args.minutes, args.clients, args.held, args.seed) else 1)


if __name__ == "__main__":
    main()
