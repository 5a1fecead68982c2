"""`python -m bench.soak [--minutes M] [--clients C] [--held 1000] [--bursts N] [--trace | --heap]`: a bounded soak.

daari (`daari serve`, its own process) in front of the fake OpenAI upstream (its own process; the request's
model picks its behaviour: tests/fakes/openai_upstream.py), as L3 and, with `frontier.enabled`, as L6 (its good
answers). Phase 1, mixed traffic for M minutes from C client threads: L0 hits, misses, streams (Chat
Completions, Messages, Responses), weak answers (L3 refuses or answers short: the judge fails them and L6
answers, real escalations, counted from /metrics), upstream faults (500, 429, a dropped or truncated stream,
malformed JSON: half pinned to L3 so the client gets the error, half escalating to L6) and clients that leave
mid-stream. Phase 2: `--held` streams opened at once and held (the upstream sends a first chunk, then waits),
each with its own upstream connection, then released. After each phase, once traffic stops: daari's open
files, threads, event-loop tasks (/metrics) and resident memory against the baseline taken after a warm-up,
RSS again after daari's idle trim (server.idle_trim_s). `--trace` runs daari under bench/heap_probe.py and
prints what holds memory (tracemalloc diffs, glibc's heap, CPython's arenas, the bounded caches) and what
malloc_trim gives back; `--heap` does the same without tracemalloc (whose own cost changes the figures).
`--bursts N` holds and releases the streams N times, RSS after each: flat means the allocators reuse what the
first burst left them, growth would be a leak.
Prints the figures (docs/performance.md, "Soak"); exit status 1 when a 500 was answered, files, threads or tasks
did not come back to their baseline, a held stream had no upstream connection, nothing escalated, or (with
`--trace`) Python's live heap did not come back.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import psutil
import trio

from bench.servers import PYTHON, Server, daari, fake_upstream, openai_tier, workdir

L3_ONLY = {"x-daari-tier-override": "L3"}  # no escalation: the client sees L3's failure
HELD_TIER = {**L3_ONLY, "x-daari-no-cache": "true"}
# what the mix sends, by weight: most traffic is hits, misses and streams; a tenth faults and departures
MIX = {"hit": 30, "miss": 15, "stream": 15, "messages": 10, "responses": 8, "weak_answer": 7, "fault": 4,
       "fault_escalates": 4, "disconnect": 7}
FAULTS = ["error500", "error429", "drop", "truncate", "malformed"]


PY_SLACK_MIB = 8.0  # with --trace: Python's live allocations may differ this much after the release
IDLE_TRIM_S = 10.0  # daari's idle memory trim (server.idle_trim_s): shorter than its default, a shorter run


def config(upstream_url: str, held: int) -> dict[str, Any]:
    """L3 without a model (the client's model name picks the fake's behaviour), L6 (frontier enabled) the fake's
    good answers: L3's weak answers and failures escalate to it. L3 takes `held` streams at once (the default,
    32 plus a queue of 64, would answer the rest 503), and its idle timeout is longer than opening them all
    takes (with the default 30 s, streams opened first were ended by daari before the last ones opened)."""
    l3 = {"executor": "openai", "base_url": upstream_url + "/v1", "max_concurrency": held + 64,
          "breaker": {"failure_threshold": 1_000_000}, "timeouts": {"idle_s": 900}}
    return {"server": {"grace_period_s": 1, "idle_trim_s": IDLE_TRIM_S}, "cache": {"l1": {"enabled": False}},
            "frontier": {"enabled": True}, "tiers": {"L3": l3, "L6": openai_tier(upstream_url, "good")}}


@dataclass
class Snapshot:
    fds: int
    threads: int
    tasks: int
    rss_mib: float
    upstream: int  # of the files: daari's connections to the upstream (its pools keep some idle, bounded)

    def __str__(self) -> str:
        return (f"{self.fds} files ({self.upstream} of them connections to the upstream), {self.threads} "
                f"threads, {self.tasks} loop tasks, {self.rss_mib:.0f} MiB RSS")


_METRICS: dict[str, httpx.Client] = {}
UPSTREAM_PORT = [0]  # the fake upstream's port, once it runs


def metrics(server: Server) -> dict[str, float]:
    """daari's /metrics samples by name with labels. Read over one kept-alive connection (counted in every
    snapshot alike): a connection per read would itself hold files, since Hypercorn keeps a connection its
    client closed while idle until its keep-alive timer fires (`server.header_timeout_s`, 30 s)."""
    client = _METRICS.setdefault(server.url, httpx.Client(base_url=server.url, timeout=120))
    samples = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("daari_"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def snapshot(server: Server) -> Snapshot:
    """daari's files, threads, loop tasks and RSS."""
    tasks = int(metrics(server).get("daari_event_loop_tasks", 0))
    ps: psutil.Process = server.ps
    upstream = sum(1 for c in ps.net_connections("tcp") if c.raddr and c.raddr.port == UPSTREAM_PORT[0])
    return Snapshot(ps.num_fds(), ps.num_threads(), tasks, ps.memory_info().rss / 2**20, upstream)


def settled(server: Server, baseline: Snapshot | None, timeout_s: float = 300) -> Snapshot:
    """The snapshot once it stops changing (and is back to `baseline`'s files, threads and tasks, if given):
    connections close a moment after their clients, worker threads idle out. Then, with a baseline, RSS once
    daari's idle trim had its quiet period (`IDLE_TRIM_S`) and RSS stopped falling."""
    started = time.monotonic()
    last = snapshot(server)
    while time.monotonic() < started + timeout_s:
        time.sleep(1.0)
        now = snapshot(server)
        steady = (now.fds, now.threads, now.tasks) == (last.fds, last.threads, last.tasks)
        if steady and (baseline is None or back(now, baseline)):
            break
        last = now
    if baseline is not None:
        print(f"  (steady after {time.monotonic() - started:.0f} s at {last.rss_mib:.0f} MiB RSS; then "
              f"{2 * IDLE_TRIM_S + 2:.0f} s quiet for the idle trim)")
        quiet_until = time.monotonic() + 2 * IDLE_TRIM_S + 2
        while time.monotonic() < quiet_until:
            time.sleep(1.0)
            last = snapshot(server)
        # a worker thread daari started during the quiet time (a periodic flush) idles out within trio's 10 s
        back_by = time.monotonic() + 30
        while not back(last, baseline) and time.monotonic() < back_by:
            time.sleep(1.0)
            last = snapshot(server)
    print(f"  (settled in {time.monotonic() - started:.0f} s)")
    return last


def back(now: Snapshot, baseline: Snapshot) -> bool:
    """Files (less upstream connections, which daari's pools keep idle up to their bound and close only when
    next used), threads and loop tasks no more than at the baseline. The tasks count includes the /metrics
    request that reads it, as the baseline's did."""
    return (now.fds - now.upstream <= baseline.fds - baseline.upstream
            and now.threads <= baseline.threads and now.tasks <= baseline.tasks)


def escalations(server: Server) -> dict[str, float]:
    """Escalation counters: by the tier whose answer was too weak, by path (weak or failed), and L6's answers."""
    return {name: value for name, value in metrics(server).items()
            if name.startswith(("daari_escalations_total", "daari_escalations_by_path_total"))
            or (name.startswith("daari_requests_total{") and 'tier="L6"' in name)}


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
    if kind == "weak_answer":  # a refusal or a short answer from L3: the judge fails it, L6 answers
        return client.post("/v1/chat/completions", json=chat(unique, model=rng.choice(["refuse", "short"]))
                           ).status_code
    if kind in ("fault", "fault_escalates"):  # L3 fails; pinned to L3 the client sees it, else L6 answers
        return client.post("/v1/chat/completions", json=chat(unique, model=rng.choice(FAULTS), stream=n % 2 == 0),
                           headers=L3_ONLY if kind == "fault" else None).status_code
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


async def hold_streams(server: Server, count: int, hold_s: float, one_prompt: bool = False
                       ) -> tuple[int, Snapshot]:
    """Open `count` streams at once, each past its first chunk; hold them `hold_s`; the snapshot while held.
    Each stream has its own prompt, so its own session in daari's session store, unless `one_prompt`."""
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
            body = chat("held stream" if one_prompt else f"held stream {i}", model="hang_stream", stream=True)
            await connecting.acquire()
            async with client.stream("POST", "/v1/chat/completions", json=body, headers=HELD_TIER) as response:
                assert response.status_code == 200, await response.aread()
                # kept, not left with `break`: closing the iterator (a break does, once collected) closes the
                # response, and the stream would not be held
                chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
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


class HeapProbe:
    """With `--trace`, daari runs under bench/heap_probe.py: `report(label)` has it write a report and a
    tracemalloc snapshot, `trim()` has it call malloc_trim(0); the reports are diffed and printed."""

    def __init__(self, out: Path, frames: int = 6) -> None:
        self.out = out
        self.frames = frames  # 0: no tracemalloc (--heap), the allocators' figures without tracing's own cost
        self.reports: list[str] = []
        self.trims = 0

    def launcher(self) -> list[str]:
        return [PYTHON, "-m", "bench.heap_probe", "--out", str(self.out), "--frames", str(self.frames)]

    def _wait(self, path: Path) -> dict[str, Any]:
        deadline = time.monotonic() + 120
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"heap probe wrote no {path.name}")
            time.sleep(0.5)
        time.sleep(0.2)
        return dict(json.loads(path.read_text()))

    def report(self, server: Server, label: str) -> dict[str, Any]:
        self.reports.append(label)
        server.process.send_signal(signal.SIGUSR1)
        body = self._wait(self.out / f"report-{len(self.reports)}.json")
        print(f"  heap probe, {label}: RSS {body['rss_mib']} MiB, traced by Python {body['traced_mib']} MiB, "
              f"glibc {body['malloc_mib']}, CPython's arenas {body['pymalloc_mib']}, {body['gc_objects']:,} objects; "
              f"bounded caches:")
        for cache in body["caches"]:
            print(f"    {cache}")
        return body

    def trim(self, server: Server) -> dict[str, Any]:
        self.trims += 1
        server.process.send_signal(signal.SIGUSR2)
        body = self._wait(self.out / f"trim-{self.trims}.json")
        print(f"  heap probe, malloc_trim(0): {body}")
        return body

    def diff(self, older: str, newer: str, top: int = 25) -> None:
        if not self.frames:
            return
        first = tracemalloc.Snapshot.load(str(self.out / f"snapshot-{self.reports.index(older) + 1}.tracemalloc"))
        second = tracemalloc.Snapshot.load(str(self.out / f"snapshot-{self.reports.index(newer) + 1}.tracemalloc"))
        print(f"  Python allocations, {older} -> {newer}, by line:")
        for stat in second.compare_to(first, "lineno")[:top]:
            print(f"    {stat}")
        print("  ... by traceback (largest growth):")
        for stat in second.compare_to(first, "traceback")[:6]:
            print(f"    {stat}")
            for line in stat.traceback.format()[-12:]:
                print(f"      {line}")


def run(minutes: float, clients: int, held: int, seed: int = 1, trace: bool = False, bursts: int = 1,
        heap: bool = False, one_prompt: bool = False) -> bool:
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        probe = HeapProbe(tmp / "heap", 6 if trace else 0) if trace or heap else None
        settings = config(upstream.url, held)
        if probe:  # the probe trims when told, to measure what a trim gives
            settings["server"]["idle_trim_s"] = 0
        with daari(settings, tmp, launcher=probe.launcher() if probe else None,
                   ready_timeout_s=240 if probe else 60) as server:
            return soak(server, upstream, minutes, clients, held, seed, probe, bursts, one_prompt)


def soak(server: Server, upstream: Server, minutes: float, clients: int, held: int, seed: int,
         probe: HeapProbe | None, bursts: int = 1, one_prompt: bool = False) -> bool:
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
    reports: dict[str, dict[str, Any]] = {}
    if probe:
        reports["baseline"] = probe.report(server, "baseline")
    escalated_before = escalations(server)
    started = time.monotonic()
    statuses = mixed_traffic(server, minutes * 60, clients, seed)
    elapsed = time.monotonic() - started
    during_peak = snapshot(server)
    escalated = {name: value - escalated_before.get(name, 0.0) for name, value in escalations(server).items()}
    after_mix = settled(server, baseline)
    total = sum(statuses.values())
    errors_500 = sum(n for key, n in statuses.items() if key.endswith(" 500"))
    print(f"mixed traffic: {total} requests in {elapsed:.0f} s from {clients} clients "
          f"({total / elapsed:.0f}/s); 500s: {errors_500}")
    for key, n in sorted(statuses.items()):
        print(f"  {key}: {n}")
    print("escalations during the traffic (daari's /metrics):")
    for name, value in sorted(escalated.items()):
        print(f"  {name}: {value:.0f}")
    print(f"at the end of traffic: {during_peak}")
    print(f"settled after traffic: {after_mix}")
    if probe:
        reports["after traffic"] = probe.report(server, "after traffic")
        probe.diff("baseline", "after traffic")
    # the held phase, `bursts` times: RSS after each release shows whether a later burst reuses the memory the
    # first left with the allocators (flat) or adds to it (a leak)
    opened_all, upstream_min = True, held
    after_bursts: list[Snapshot] = []
    previous = "after traffic"
    for burst in range(1, bursts + 1):
        opened, while_held = trio.run(hold_streams, server, held, 5.0, one_prompt)
        opened_all = opened_all and opened == held
        upstream_min = min(upstream_min, while_held.upstream)
        print(f"burst {burst}: {opened} streams held at once: {while_held}")
        after_held = settled(server, baseline)
        after_bursts.append(after_held)
        print(f"burst {burst}: settled after release: {after_held}")
        if probe:
            label = f"after release {burst}"
            reports[label] = probe.report(server, label)
            probe.diff(previous, label)
            previous = label
    if probe:
        probe.trim(server)
        probe.report(server, "after release and malloc_trim")
    # Memory (docs/performance.md, "Soak"): RSS is reported, not judged. It counts memory the allocators keep
    # free for reuse (glibc's heap, CPython's arenas) after a peak, which the idle trim returns only in part.
    # What must come back is what daari's objects hold: with --trace, Python's live allocations after each
    # release within PY_SLACK_MIB of after the traffic (the bounded caches fill during the traffic).
    print(f"RSS: {baseline.rss_mib:.0f} MiB at the baseline, {after_mix.rss_mib:.0f} after the traffic, "
          f"{while_held.rss_mib:.0f} while {held} streams were held, after each release and the idle trim: "
          + ", ".join(f"{s.rss_mib:.0f}" for s in after_bursts))
    memory_ok = True
    if probe and probe.frames:
        for burst in range(1, bursts + 1):
            grown = reports[f"after release {burst}"]["traced_mib"] - reports["after traffic"]["traced_mib"]
            memory_ok = memory_ok and grown <= PY_SLACK_MIB
            print(f"Python's live allocations after release {burst}: {grown:+.1f} MiB against after the traffic "
                  f"(bound {PY_SLACK_MIB} MiB): " + ("back" if grown <= PY_SLACK_MIB else "NOT back"))
    every_stream_upstream = upstream_min >= held
    print(f"held streams with their upstream connection open at the snapshot (fewest of the bursts): "
          f"{upstream_min} of {held}")
    # with --minutes 0 (the held phase alone) there is no traffic to escalate
    escalated_any = minutes == 0 or sum(
        v for k, v in escalated.items() if k.startswith("daari_escalations_by_path_total")) > 0
    ok = (errors_500 == 0 and back(after_mix, baseline) and all(back(s, baseline) for s in after_bursts) and opened_all
          and every_stream_upstream and memory_ok and escalated_any)
    traced = probe is not None and probe.frames > 0
    print("soak: " + ("files, threads and tasks back to their baseline" + (", Python's heap too" if traced else "")
                      + "; every held stream had its upstream connection; L6 escalations; no 500"
                      if ok else "FAILED"))
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--held", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--heap", action="store_true",
                        help="as --trace without tracemalloc: the allocators' figures (glibc, CPython's arenas) only")
    parser.add_argument("--one-prompt", action="store_true",
                        help="every held stream sends the same prompt: no new session per stream (what pins memory)")
    parser.add_argument("--bursts", type=int, default=1,
                        help="hold and release the --held streams this many times, RSS after each (reuse or growth)")
    parser.add_argument("--trace", action="store_true",
                        help="run daari under bench/heap_probe.py (tracemalloc: slower) and print what holds memory")
    args = parser.parse_args()
    ok = run(args.minutes, args.clients, args.held, args.seed, args.trace, args.bursts, args.heap,
             args.one_prompt)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
