"""`python -m bench.escalation`: time to first token (TTFT) and total time of a stream request on each path.

Paths: the upstream called directly; daari with L3 accepted (alone, streamed live; and with an L4 behind it,
buffered); L3 refusing and L4 answering (buffered, the default); the same in live mode (no escalation once
bytes are out); and an L4 without logprobs, whose answer is judged by a self-evaluation call to the same
tier. The fakes pace their output (`token_delay_s` per generated chunk) so that TTFT means something. Every
request is sent with `X-Daari-No-Cache: true` so each one runs the path instead of hitting L0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from bench.l0_hit import PATH, REQUEST
from bench.report import Table, fmt, print_tables, ratio
from bench.servers import (
    client_cores,
    daari,
    fake_upstream,
    ollama_tier,
    openai_tier,
    server_core,
    workdir,
)

TOKEN_DELAY_S = 0.01  # 100 tokens/s: a fast local model
WARMUP = 2


@dataclass(frozen=True)
class Timing:
    ttft_ms: float
    total_ms: float
    meta: dict[str, Any] | None


@dataclass(frozen=True)
class Path_:
    name: str
    config: Callable[[str, str], dict[str, Any]] | None  # (openai url, ollama url) -> daari config; None: direct
    body: dict[str, Any]


def _tiers(l3: dict[str, Any], l4: dict[str, Any] | None = None, l5: dict[str, Any] | None = None,
           **extra: Any) -> dict[str, Any]:
    tiers = {"L3": l3, **({"L4": l4} if l4 else {}), **({"L5": l5} if l5 else {})}
    return {"server": {"grace_period_s": 1}, "tiers": tiers, **extra}


STREAM = {**REQUEST, "stream": True}
PATHS = [
    Path_("direct upstream call (fake OpenAI)", None, {**STREAM, "model": "good"}),
    Path_("daari, L3 accepted (L3 only: streamed live)",
          lambda o, _: _tiers(openai_tier(o, "good")), STREAM),
    Path_("daari, L3 accepted with L4 behind it (buffered)",
          lambda o, ol: _tiers(openai_tier(o, "good"), ollama_tier(ol, "good")), STREAM),
    Path_("daari, L3 refuses (buffered) -> L4 answers (last tier: streamed live)",
          lambda o, ol: _tiers(openai_tier(o, "refuse"), ollama_tier(ol, "good")), STREAM),
    Path_("daari, L3 refuses, live mode (L3's answer streams, no escalation)",
          lambda o, ol: _tiers(openai_tier(o, "refuse"), ollama_tier(ol, "good"),
                               routing={"stream_escalation": "live"}), STREAM),
    # An L5 behind L4 so that L4 is not the last tier: the last tier streams live and is not graded.
    Path_("daari, L3 refuses -> L4 judged on logprobs (L5 behind; buffered)",
          lambda o, ol: _tiers(openai_tier(o, "refuse"), openai_tier(o, "good"), ollama_tier(ol, "good")),
          {**STREAM, "logprobs": True}),
    Path_("daari, L3 refuses -> L4 self-evaluated, no logprobs (L5 behind; buffered)",
          lambda o, ol: _tiers(openai_tier(o, "refuse"), openai_tier(o, "good"), ollama_tier(ol, "good")),
          STREAM),
]


def stream_once(client: httpx.Client, url: str, body: dict[str, Any]) -> Timing:
    """POST a stream request; TTFT is when the first chunk with text content arrives."""
    started = time.perf_counter()
    ttft: float | None = None
    meta: dict[str, Any] | None = None
    with client.stream("POST", url, json=body, headers={"x-daari-no-cache": "true"}) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            meta = chunk.get("daari_meta", meta)
            choices = chunk.get("choices") or []
            if ttft is None and choices and (choices[0].get("delta") or {}).get("content"):
                ttft = time.perf_counter()
    ended = time.perf_counter()
    if ttft is None:
        raise RuntimeError(f"no text content in the stream from {url}")
    return Timing((ttft - started) * 1000, (ended - started) * 1000, meta)


def measure_path(url: str, body: dict[str, Any], requests: int) -> list[Timing]:
    with httpx.Client(timeout=30) as client:
        for _ in range(WARMUP):
            stream_once(client, url, body)
        return [stream_once(client, url, body) for _ in range(requests)]


def _answered_by(meta: dict[str, Any] | None) -> str:
    if meta is None:
        return "upstream"
    attempts = ", ".join(f"{a['tier']} {a['outcome']} {fmt(a['confidence'])}" for a in meta.get("attempts") or [])
    return f"{meta.get('tier')} ({attempts})"


def run(requests: int = 20) -> list[Table]:
    if client_cores():
        os.sched_setaffinity(0, client_cores() or set())  # this process is the client
    results: dict[str, list[Timing]] = {}
    with workdir() as tmp, \
            fake_upstream("openai", tmp, token_delay_s=TOKEN_DELAY_S, cores=client_cores()) as openai, \
            fake_upstream("ollama", tmp, token_delay_s=TOKEN_DELAY_S, cores=client_cores()) as ollama:
        for path in PATHS:
            if path.config is None:
                results[path.name] = measure_path(openai.url + PATH, path.body, requests)
                continue
            with daari(path.config(openai.url, ollama.url), tmp, cores=server_core()) as proxy:
                results[path.name] = measure_path(proxy.url + PATH, path.body, requests)

    direct = results[PATHS[0].name]
    d_ttft = statistics.median(t.ttft_ms for t in direct)
    d_total = statistics.median(t.total_ms for t in direct)
    table = Table("Stream requests: time to first token and total, each path vs the direct upstream call",
                  ["path", "answered by", "TTFT p50 ms", "TTFT vs direct", "total p50 ms", "total vs direct"])
    medians: dict[str, tuple[float, float]] = {}
    for path in PATHS:
        timings = results[path.name]
        ttft = statistics.median(t.ttft_ms for t in timings)
        total = statistics.median(t.total_ms for t in timings)
        medians[path.name] = (ttft, total)
        table.add(path.name, _answered_by(timings[-1].meta), ttft, ratio(ttft, d_ttft), total,
                  ratio(total, d_total))
    with_lp, self_eval = medians[PATHS[5].name][1], medians[PATHS[6].name][1]
    table.notes += [
        f"{requests} requests per path after {WARMUP} warm-ups, one at a time; fakes pace output at "
        f"{TOKEN_DELAY_S * 1000:g} ms per generated chunk (the fake OpenAI 'good' answer is about 13 chunks, "
        "'refuse' 5, the fake Ollama 'good' 3)",
        f"cost of the L4 self-evaluation (confidence check without logprobs): {fmt(self_eval - with_lp)} ms "
        f"on the total p50 ({ratio(self_eval, with_lp)} of the same path judged on logprobs)",
    ]
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20, help="measured requests per path")
    print_tables(run(parser.parse_args().requests))


if __name__ == "__main__":
    main()
