"""`python -m bench.large_bodies`: small cached requests while large request bodies arrive.

One client sends a small request that is an L0 hit, over and over (closed loop, one connection), and
records its latency. In the same run a second client keeps sending a large body (an L0 hit too, so that
only daari's own parsing, validation and hashing of the body cost CPU). The p50/p99 of the small requests
is measured without and with the large bodies, for daari with large bodies parsed on a worker thread
(`server.thread_parse_bytes` default) and for daari parsing every body on the event loop
(`thread_parse_bytes` set above the body size) — the ratios compare the two in one run.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import httpx

from bench.report import Table, print_tables
from bench.servers import PYTHON, Server, daari, dumps, fake_upstream, openai_tier, workdir

PATH = "/v1/chat/completions"
HEADERS = {"content-type": "application/json"}
SMALL = {"model": "good", "messages": [{"role": "user", "content": "What does `git rebase -i HEAD~3` do?"}]}


def large_request(mib: float) -> dict[str, Any]:
    """A coding agent's large turn: many messages of code, about `mib` MiB of JSON."""
    chunk = "def handler(event, context):\n    return {'status': 200, 'body': event['body']}\n" * 80
    count = max(1, int(mib * 1024 * 1024 / (len(chunk) + 60)))
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"file {i}:\n{chunk}"}
                for i in range(count)]
    messages.append({"role": "user", "content": "summarize the files above"})
    return {"model": "good", "messages": messages}


def warm(server: Server, body: bytes) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        client.post(PATH, content=body, headers=HEADERS).raise_for_status()
        hit = client.post(PATH, content=body, headers=HEADERS)
    if hit.headers.get("x-daari-cache") != "hit":
        raise RuntimeError(f"not an L0 hit: {hit.headers}")


def small_latencies(server: Server, duration_s: float) -> list[float]:
    body = dumps(SMALL)
    out: list[float] = []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        deadline = time.perf_counter() + duration_s
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            response = client.post(PATH, content=body, headers=HEADERS)
            out.append((time.perf_counter() - start) * 1000)
            if response.status_code != 200 or response.headers.get("x-daari-cache") != "hit":
                raise RuntimeError(f"small request failed: {response.status_code}")
    return out


def large_sender(server: Server, body: bytes, stop: threading.Event, sent: list[float]) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as client:
        while not stop.is_set():
            start = time.perf_counter()
            response = client.post(PATH, content=body, headers=HEADERS)
            sent.append((time.perf_counter() - start) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"large request failed: {response.status_code}")


def measure(server: Server, large: bytes, duration_s: float) -> dict[str, float]:
    quiet = small_latencies(server, duration_s)
    stop = threading.Event()
    sent: list[float] = []
    sender = threading.Thread(target=large_sender, args=(server, large, stop, sent), daemon=True)
    sender.start()
    time.sleep(0.3)
    busy = small_latencies(server, duration_s)
    stop.set()
    sender.join(120)
    return {"quiet_p50": _pct(quiet, 50), "quiet_p99": _pct(quiet, 99), "busy_p50": _pct(busy, 50),
            "busy_p99": _pct(busy, 99), "small_n": len(busy), "large_n": len(sent),
            "large_ms": statistics.median(sent) if sent else 0.0}


def _pct(values: list[float], pct: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measurement")
    parser.add_argument("--mib", type=float, default=7.5, help="size of the large body")
    args = parser.parse_args()
    large = dumps(large_request(args.mib))
    rows: dict[str, dict[str, float]] = {}
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        for label, threshold in (("on the event loop", 1 << 30), ("on a worker thread", None)):
            server_cfg: dict[str, Any] = {"grace_period_s": 1}
            if threshold is not None:
                server_cfg["thread_parse_bytes"] = threshold
            config = {"server": server_cfg, "tiers": {"L3": openai_tier(upstream.url, "good")}}
            with daari(config, tmp, launcher=[PYTHON, "-m", "daari"]) as server:
                warm(server, dumps(SMALL))
                warm(server, large)
                rows[label] = measure(server, large, args.duration)
    table = Table(f"Small cached requests (p50/p99 ms) while {len(large) / 2**20:.1f} MiB bodies arrive "
                  f"({args.duration:g} s each)",
                  ["large bodies parsed", "quiet p50", "quiet p99", "busy p50", "busy p99", "busy p99 / quiet p99",
                   "small reqs", "large reqs", "large ms (p50)"])
    for label, row in rows.items():
        table.rows.append([label, f"{row['quiet_p50']:.2f}", f"{row['quiet_p99']:.2f}", f"{row['busy_p50']:.2f}",
                           f"{row['busy_p99']:.2f}", f"{row['busy_p99'] / row['quiet_p99']:.1f}x",
                           f"{row['small_n']:.0f}", f"{row['large_n']:.0f}", f"{row['large_ms']:.0f}"])
    loop, thread = rows["on the event loop"], rows["on a worker thread"]
    table.rows.append(["thread vs loop (busy p99)", "", "", "", f"{thread['busy_p99'] / loop['busy_p99']:.2f}x",
                       "", "", "", ""])
    print_tables([table])


if __name__ == "__main__":
    main()
