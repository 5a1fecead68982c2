"""`python -m bench.hit_steps`: CPU cost of each daari step on the L0 hit path, in one process, no network.

Not a target figure: a map of where a hit's CPU goes, beside the whole request's CPU (from the L0 hit run:
server CPU time / requests), so a hot spot shows up as a share of it. Each step is timed over many calls of
the real function on the benchmark's request and a stored answer of the same size.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import trio

from actors.actor import Actor
from actors.mailbox import open_mailbox
from bench.l0_hit import REQUEST
from bench.report import Table, print_tables
from daari.cache.l0_key import l0_key
from daari.pipeline.meta import Attempt, Meta
from daari.protocol.chat import Completion, Usage
from daari.protocol.events import replay
from daari.protocol.wire import OPENAI
from daari.routing.classifier import classify

ANSWER = ("An interactive rebase of the last three commits: git opens an editor listing them so that you can "
          "reorder, squash, edit or drop each one, then replays them on top of HEAD~3. It rewrites history.")
CALLS = 2000


def _time_us(fn: Callable[[], Any], calls: int = CALLS) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


class _Echo(Actor):
    async def handle(self, request: Any) -> Any:
        return request


async def _trio_steps() -> dict[str, float]:
    """Costs that need a Trio loop: one actor ask/reply, one nursery with a watcher task cancelled."""
    results: dict[str, float] = {}
    address, inbox = open_mailbox("echo", 256)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_Echo().run, inbox)
        await address.ask(1)
        start = time.perf_counter()
        for _ in range(CALLS):
            await address.ask(1)
        results["actor ask/reply round trip (CacheActor's L0Get, minus the LRU lookup)"] = \
            (time.perf_counter() - start) / CALLS * 1e6

        start = time.perf_counter()
        for _ in range(CALLS):
            async with trio.open_nursery() as inner:
                inner.start_soon(trio.sleep_forever)  # stands in for watch_disconnect
                await trio.lowlevel.checkpoint()
                inner.cancel_scope.cancel()
        results["per-request nursery + disconnect watcher task, started and cancelled"] = \
            (time.perf_counter() - start) / CALLS * 1e6
        nursery.cancel_scope.cancel()
    return results


def run() -> list[Table]:
    raw = json.dumps(REQUEST).encode()
    headers = {"content-type": "application/json"}
    request = OPENAI.parse(json.loads(raw), headers)
    completion = Completion(text=ANSWER, usage=Usage(prompt_tokens=24, completion_tokens=48),
                            model="good", finish_reason="stop")
    meta = Meta(tier="L0", task_type="code_explain", cache_hit=True, executor="cache", model="good",
                latency_ms=0.5, confidence=1.0, rule_id="R-A3", ceiling="L3",
                attempts=[Attempt("L3", "accepted", 1.0)])
    meta_json = meta.to_json()
    events = list(replay(completion))
    body = OPENAI.render(completion, request, meta_json, events)
    steps: dict[str, float] = {
        "json.loads of the request body": _time_us(lambda: json.loads(raw)),
        "Wire.parse (validate into a ChatRequest)": _time_us(lambda: OPENAI.parse(json.loads(raw), headers)),
        "classify (heuristic rules; runs before the L0 lookup)": _time_us(lambda: classify(request)),
        "l0_key (normalize + canonical JSON + SHA-256)": _time_us(lambda: l0_key(request)),
        "list(replay(completion)) (built for non-stream hits too)": _time_us(lambda: list(replay(completion))),
        "Meta.to_json (dataclasses.asdict)": _time_us(meta.to_json),
        "Wire.render (OpenAI chat.completion body)": _time_us(
            lambda: OPENAI.render(completion, request, meta_json, events)),
        "json.dumps of the response body": _time_us(
            lambda: json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()),
    }
    steps.update(trio.run(_trio_steps))
    table = Table("Where a hit's CPU goes: daari's own steps (microseconds per call, one process)",
                  ["step", "us per call"])
    for name, us in steps.items():
        table.add(name, us)
    table.add("sum of the steps above", sum(steps.values()))
    table.notes.append("Hypercorn's own work (h11 parsing, the ASGI wrapper, socket I/O) is not in this table; "
                       "the bare-app row of the L0 table measures it")
    return [table]


def main() -> None:
    print_tables(run())


if __name__ == "__main__":
    main()
