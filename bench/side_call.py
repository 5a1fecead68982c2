"""`python -m bench.side_call`: does a side call generating on the embedded model slow an agent turn?

daari runs with the embedded model at L3, L1 on (so every agent turn is embedded for the agent-prefix
lookup) and a fake OpenAI upstream at L4 that answers agent turns with a tool call. One run measures:
1. agent turns alone (each one distinct: an L0 miss, an L1 embedding and lookup, the upstream's answer);
2. the same agent turns while a long side call (a title-like prompt forced to L3, 400 tokens) is generating.
It prints both, their ratio (target: <= 1.25) and how often the generation paused for request work.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import httpx

from bench.report import Table, fmt, machine, print_tables, ratio
from bench.servers import daari, fake_upstream, openai_tier, workdir

SYSTEM = ("You are an interactive CLI tool that helps users with software engineering tasks. " * 40).strip()
TOOLS = [{"type": "function", "function": {
    "name": name, "description": f"{name} a file in the repository. " * 8,
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
    for name in ("Read", "Edit", "Write", "Glob", "Grep", "Bash")]
HISTORY = [
    {"role": "user", "content": "The test in tests/test_parser.py fails with a KeyError on 'name'. Fix it."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "Read", "arguments": '{"path": "tests/test_parser.py"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "def test_parse():\n    assert parse('a')['name']\n" * 30},
]


def agent_turn(i: int) -> dict[str, Any]:
    """A Claude-Code-like turn (tools, a tool result in history); `i` makes each one an L0 miss."""
    return {"model": "tools", "temperature": 0, "tools": TOOLS, "messages": [
        {"role": "system", "content": SYSTEM}, *HISTORY,
        {"role": "user", "content": f"Now read src/parser_{i}.py and tell me where 'name' is set."}]}


def side_call(i: int) -> dict[str, Any]:
    """A long generation on the embedded model (forced to L3; a distinct prompt each time: no cache)."""
    return {"model": "any", "max_tokens": 400, "stream": True, "messages": [
        {"role": "user", "content": f"Write a long, detailed essay about the history of version control, part {i}."}]}


class SideCalls:
    """Keeps one side call generating on the embedded model until stopped (a new one when one ends)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stopped = threading.Event()
        self.generating = threading.Event()  # set once the first text arrived
        self.tokens = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=600) as client:
            i = 0
            while not self.stopped.is_set():
                i += 1
                with client.stream("POST", self.url + "/v1/chat/completions", json=side_call(i),
                                   headers={"x-daari-tier-override": "L3"}) as response:
                    response.raise_for_status()
                    for line in response.iter_lines():
                        if '"content":' in line and line.startswith("data: "):
                            self.tokens += 1
                            self.generating.set()
                        if self.stopped.is_set():
                            break

    def __enter__(self) -> SideCalls:
        self.thread.start()
        if not self.generating.wait(300):
            raise RuntimeError("the side call produced no text in 300 s")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(60)


def timed_turns(client: httpx.Client, url: str, start: int, count: int) -> list[float]:
    times = []
    for i in range(start, start + count):
        started = time.perf_counter()
        response = client.post(url + "/v1/chat/completions", json=agent_turn(i))
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        meta = response.json().get("daari_meta") or {}
        if meta.get("tier") != "L4":
            raise RuntimeError(f"the agent turn was answered by {meta.get('tier')}, not the upstream at L4")
        times.append(elapsed * 1000)
    return times


def pauses(url: str) -> float:
    """How often a generation waited between two tokens for request work (the embedded tier's /healthz)."""
    tier = (httpx.get(url + "/healthz", timeout=5).json().get("tiers") or {}).get("L3") or {}
    return float(tier.get("generation_pauses", float("nan")))


def run(turns: int = 20, rounds: int = 2) -> list[Table]:
    alone: list[float] = []
    beside: list[float] = []
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
        config = {"server": {"grace_period_s": 1}, "log": {"decisions": False},
                  "tiers": {"L3": {"executor": "embedded"}, "L4": openai_tier(upstream.url, "tools")}}
        with daari(config, tmp, wait_models=True, ready_timeout_s=600) as server, \
                httpx.Client(timeout=120) as client:
            timed_turns(client, server.url, 0, 3)  # warm-up: connections, the first embedding
            n = 1000
            side_tokens = 0
            for _ in range(rounds):  # interleaved, so a change in the machine's load hits both halves
                alone += timed_turns(client, server.url, n, turns)
                n += turns
                with SideCalls(server.url) as side:
                    beside += timed_turns(client, server.url, n, turns)
                    side_tokens += side.tokens
                n += turns
            paused = pauses(server.url)
    table = Table("An agent turn (L1 embedding + upstream at L4) alone and beside a side call generating at L3",
                  ["case", "p50 ms", "p90 ms", "mean ms"])
    for name, values in (("alone", alone), ("beside a side call", beside)):
        table.add(name, fmt(statistics.median(values)), fmt(statistics.quantiles(values, n=10)[-1]),
                  fmt(statistics.fmean(values)))
    table.notes.append(f"ratio beside / alone (p50): {ratio(statistics.median(beside), statistics.median(alone))} "
               f"(target <= 1.25); mean: {ratio(statistics.fmean(beside), statistics.fmean(alone))}")
    table.notes.append(f"{len(alone)} turns each, {rounds} interleaved rounds; the side calls streamed {side_tokens} "
               f"chunks meanwhile; generation pauses for request work: {fmt(paused)}; {machine()}")
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.side_call", description=__doc__)
    parser.add_argument("--turns", type=int, default=20, help="agent turns per half-round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print_tables(run(args.turns, args.rounds))


if __name__ == "__main__":
    main()
