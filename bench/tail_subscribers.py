"""Live-tail and decision-log cost: request latency with 0, 1 and 50 tail subscribers attached (ratios to 0),
and what recording one decision costs (the log row, its batched SQLite write).

`python -m bench.tail_subscribers [--requests N]`. In-process daari on loopback; one client, sequential
requests answered by an L2 rule (the whole pipeline, no model, no upstream), so the figure is the request
path's own latency with every subscriber's work included.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import trio

from bench.report import Table, fmt, print_tables, ratio
from daari.config import PricingConfig, config_from_dict
from daari.observe.decision_log import DecisionLogStore
from daari.observe.decision_row import decision_row
from daari.pipeline.decision import AttemptRecord, RoutingDecision
from daari.server.serve import run_server

BODY = {"model": "m", "messages": [{"role": "user", "content": "Format as JSON: {a: 1}"}]}


async def _drain(ws: object) -> None:
    while True:
        await ws.get_message()  # type: ignore[attr-defined]


async def hit_latencies(subscribers: int, requests: int, data_dir: Path) -> list[float]:
    config = config_from_dict({"server": {"port": 0}, "data_dir": str(data_dir), "log": {"summary_interval_s": 0}})
    async with trio.open_nursery() as nursery:
        server = await nursery.start(run_server, config)
        async with httpx.AsyncClient(base_url=server.url) as client:
            async with trio.open_nursery() as tails:
                for _ in range(subscribers):
                    ws = await trio_websocket_connect(server.url, tails)
                    tails.start_soon(_drain, ws)
                while server.parts.tail.open < subscribers:  # noqa: ASYNC110 (a bench polls)
                    await trio.sleep(0.01)
                latencies = []
                for _ in range(50):  # warm-up
                    await client.post("/v1/chat/completions", json=BODY)
                for _ in range(requests):
                    started = time.perf_counter()
                    response = await client.post("/v1/chat/completions", json=BODY)
                    latencies.append((time.perf_counter() - started) * 1000)
                    assert response.headers["x-daari-tier"] == "L2"  # a rule answer: no model, no upstream
                tails.cancel_scope.cancel()
        nursery.cancel_scope.cancel()
    return latencies


async def trio_websocket_connect(url: str, nursery: trio.Nursery) -> object:
    from trio_websocket import connect_websocket_url

    return await connect_websocket_url(nursery, url.replace("http", "ws") + "/v1/daari/tail")


def decision_cost(rows: int) -> tuple[float, float]:
    """Microseconds per decision: building its row, and writing it in batches of 256."""
    decision = RoutingDecision(
        request_id="req_0", time=time.time(), protocol="openai", client="aider", model_requested="m", stream=False,
        status=200, tier="L3", executor="openai", model="m", cache="miss", task_type="generate_small",
        rule_id="R-A3", ceiling="L3", classifier="heuristic", agent_turn=False, confidence=0.9,
        escalated_from=(), attempts=(AttemptRecord("L3", "accepted", 0.9),), warning=None, error=None,
        latency_ms=12.0, ttft_ms=3.0, prompt_tokens=120, completion_tokens=40, prompt_hash="ab12")
    pricing = PricingConfig()
    started = time.perf_counter()
    built = [dict(decision_row(decision, pricing), request_id=f"req_{i}") for i in range(rows)]
    row_us = (time.perf_counter() - started) / rows * 1e6
    with tempfile.TemporaryDirectory() as tmp:
        store = DecisionLogStore(Path(tmp) / "d.sqlite")
        started = time.perf_counter()
        for index in range(0, rows, 256):
            store.insert(built[index:index + 256])
        write_us = (time.perf_counter() - started) / rows * 1e6
        store.close()
    return row_us, write_us


def run(requests: int) -> list[Table]:
    table = Table(f"Request latency with live-tail subscribers ({requests} sequential L2 answers each)",
                  ["subscribers", "p50 ms", "p99 ms", "p50 vs 0", "p99 vs 0"])
    base: tuple[float, float] | None = None
    for count in (0, 1, 50):
        with tempfile.TemporaryDirectory() as tmp:
            latencies = trio.run(hit_latencies, count, requests, Path(tmp))
        p50 = statistics.median(latencies)
        p99 = statistics.quantiles(latencies, n=100)[98]
        base = base or (p50, p99)
        table.add(str(count), p50, p99, ratio(p50, base[0]), ratio(p99, base[1]))
    row_us, write_us = decision_cost(20_000)
    cost = Table("Recording one decision (off the request path: the decision log's own task)",
                 ["step", "µs per decision"])
    cost.add("build the row (flatten, price)", fmt(row_us))
    cost.add("SQLite write, batches of 256", fmt(write_us))
    return [table, cost]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    print_tables(run(args.requests))


if __name__ == "__main__":
    main()
