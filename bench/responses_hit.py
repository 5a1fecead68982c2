"""`python -m bench.responses_hit`: an L0 hit through the Responses API vs the same hit through chat
completions, in one run against one daari (same stored answer: the two requests are the same neutral
request). What the Responses wire costs on the hot path (parse, render, the response store write).

`store: false` is measured too: with `store` true (OpenAI's default) every answer, hits included, is
written to the response store before it is sent.
"""

from __future__ import annotations

import argparse

import httpx

from bench.load import Measured, measure, tool_name
from bench.report import Table, print_tables, ratio
from bench.servers import client_cores, daari, dumps, fake_upstream, openai_tier, placement, server_core, workdir

SYSTEM = "You are a helpful coding assistant."
QUESTION = "What does `git rebase -i HEAD~3` do?"
CHAT = {"model": "gpt-4o-mini", "temperature": 0,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]}
RESPONSES = {"model": "gpt-4o-mini", "temperature": 0, "instructions": SYSTEM, "input": QUESTION}
HEADERS = {"Content-Type": "application/json"}
WARMUP_S = 2.0


def run(duration_s: float) -> list[Table]:
    cases = {"chat completions": ("/v1/chat/completions", CHAT),
             "responses, store true": ("/v1/responses", RESPONSES),
             "responses, store false": ("/v1/responses", {**RESPONSES, "store": False})}
    results: dict[tuple[str, int], Measured] = {}
    with workdir() as tmp, fake_upstream("openai", tmp, cores=client_cores()) as upstream, \
            daari({"server": {"grace_period_s": 1}, "tiers": {"L3": openai_tier(upstream.url, "good")}}, tmp,
                  cores=server_core()) as proxy:
        with httpx.Client(base_url=proxy.url, timeout=30) as client:
            for path, body in cases.values():  # the first stores the answer; every later one must hit
                client.post(path, content=dumps(body), headers=HEADERS).raise_for_status()
            for path, body in cases.values():
                if client.post(path, content=dumps(body), headers=HEADERS).headers.get("x-daari-cache") != "hit":
                    raise RuntimeError(f"{path} was not an L0 hit")
        for name, (path, body) in cases.items():
            measure(proxy, path, dumps(body), HEADERS, connections=20, duration_s=WARMUP_S)
            for connections in (1, 20):
                results[(name, connections)] = measure(proxy, path, dumps(body), HEADERS,
                                                       connections=connections, duration_s=duration_s)
    table = Table("L0 hit: Responses API vs chat completions (same daari, same stored answer, one run)",
                  ["request", "connections", "req/s", "p50 ms", "p99 ms", "server CPU us/request"])
    for connections in (1, 20):
        for name in cases:
            m = results[(name, connections)]
            table.add(name, connections, m.load.rps, m.load.p50_ms, m.load.p99_ms, m.cpu_us_per_request)
    chat, stored, unstored = (results[(n, 20)] for n in cases)
    table.notes += [
        f"client: {tool_name()}, {duration_s:g} s per row after a {WARMUP_S:g} s warm-up; placement: {placement()}",
        f"req/s at 20 connections, responses (store false) / chat: {ratio(unstored.load.rps, chat.load.rps)}; "
        f"responses (store true) / chat: {ratio(stored.load.rps, chat.load.rps)}",
    ]
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured row")
    print_tables(run(parser.parse_args().duration))


if __name__ == "__main__":
    main()
