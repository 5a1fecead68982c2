"""`python -m bench.hit_steps`: CPU cost of each daari step on the L0 hit path, in one process, no network.

Not a target figure: a map of where a hit's CPU goes, beside the whole request's CPU (from the L0 hit run:
server CPU time / requests), so a hot spot shows up as a share of it. Each step is timed over many calls of
the real function on the benchmark's request and a stored answer of the same size.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from typing import Any

import trio

from bench.l0_hit import REQUEST
from bench.report import Table, print_tables
from daari.cache.hit_requests import HitRequests
from daari.cache.key_memo import L0KeyMemo, memo_key
from daari.cache.l0_key import l0_key
from daari.cache.l0_memory import L0Memory
from daari.cache.l0_store import L0Entry
from daari.config import config_from_dict
from daari.jsonio import dumps, loads, within_encode_depth
from daari.pipeline.meta import Attempt, Meta
from daari.protocol.chat import Completion, Usage
from daari.protocol.wire import OPENAI
from daari.server.serve import run_server

ANSWER = ("An interactive rebase of the last three commits: git opens an editor listing them so that you can "
          "reorder, squash, edit or drop each one, then replays them on top of HEAD~3. It rewrites history.")
CALLS = 2000


def _time_us(fn: Callable[[], Any], calls: int = CALLS) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


async def _whole_app_hit_us(raw: bytes, completion: Completion) -> float:
    """One ASGI call of the real DaariApp on an L0 hit (no sockets, no Hypercorn): daari's whole share."""
    with tempfile.TemporaryDirectory() as data:
        config = config_from_dict({"server": {"port": 0}, "data_dir": data,
                                   "tiers": {"L3": {"executor": "openai", "base_url": "http://127.0.0.1:9"}}})
        async with trio.open_nursery() as nursery:
            server = await nursery.start(run_server, config)
            request = OPENAI.parse(loads(raw), {})
            server.parts.l0_memory.remember(l0_key(request).digest, L0Entry(completion, tier="L3"))
            app = server.parts.app
            scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions",
                     "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]}

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": raw, "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                pass

            await app(scope, receive, send)
            start = time.perf_counter()
            for _ in range(CALLS):
                await app(scope, receive, send)
            elapsed = (time.perf_counter() - start) / CALLS * 1e6
            nursery.cancel_scope.cancel()
    return elapsed


def run() -> list[Table]:
    raw = dumps(REQUEST)
    headers = {"content-type": "application/json"}
    parsed = loads(raw)
    request = OPENAI.parse(parsed, headers)
    completion = Completion(text=ANSWER, usage=Usage(prompt_tokens=24, completion_tokens=48),
                            model="good", finish_reason="stop")
    meta = Meta(tier="L0", task_type="code_explain", cache_hit=True, executor="cache", model="good",
                latency_ms=0.5, confidence=1.0, rule_id="R-A3", ceiling="L3",
                attempts=[Attempt("L3", "accepted", 1.0)])
    meta_json = meta.to_json()
    body = OPENAI.render(completion, request, meta_json, [])
    memory = L0Memory(1024 * 1024)
    key_memo = L0KeyMemo()
    key_memo.put(memo_key(raw, "openai", None, ""), l0_key(request).digest)
    memory.remember("k", L0Entry(completion, tier="L3"))
    hit_requests = HitRequests()
    hit_requests.put(memo_key(raw, "openai", None, ""), request, len(raw))
    lane_memo = L0KeyMemo()
    lane_memo.put(memo_key(raw, "openai", None, ""), "k")

    def hit_lane() -> object:
        """The L0 step's hit lane lookups (pipeline/steps/l0.py) for a body already answered from memory (the
        request's copy included)."""
        found_by = memo_key(raw, "openai", None, "")
        remembered, key = hit_requests.get(found_by), lane_memo.get(found_by)
        if remembered is None or key is None or memory.peek(key) is None:
            raise RuntimeError("the hit lane missed")
        return remembered.for_caller(OPENAI.passthrough(headers), "")

    steps: dict[str, float] = {
        "loads of the request body (orjson)": _time_us(lambda: loads(raw)),
        "the depth check of the parsed body (one orjson encode, pipeline/body_work.py)": _time_us(
            lambda: within_encode_depth(parsed)),
        "Wire.parse (validate into a ChatRequest)": _time_us(lambda: OPENAI.parse(loads(raw), headers)),
        "l0_key (normalize + canonical JSON + SHA-256): a body seen for the first time": _time_us(
            lambda: l0_key(request)),
        "the key memo instead (BLAKE2b of the bytes + LRU lookup): the same body again": _time_us(
            lambda: key_memo.get(memo_key(raw, "openai", None, ""))),
        "L0Memory.peek (no actor round trip on a hit)": _time_us(lambda: memory.peek("k")),
        "the hit lane instead of all the above (the same body answered from memory before)": _time_us(hit_lane),
        "Meta.to_json": _time_us(meta.to_json),
        "Wire.render (OpenAI chat.completion body)": _time_us(
            lambda: OPENAI.render(completion, request, meta_json, [])),
        "dumps of the response body (orjson)": _time_us(lambda: dumps(body)),
    }
    table = Table("Where a hit's CPU goes: daari's own steps (microseconds per call, one process)",
                  ["step", "us per call"])
    for name, us in steps.items():
        table.add(name, us)
    first_hit = ("loads", "the depth check", "Wire.parse", "the key memo", "L0Memory.peek", "Meta.to_json",
                 "Wire.render", "dumps")
    lane_hit = ("the hit lane", "Meta.to_json", "Wire.render", "dumps")
    table.add("sum for a body's first hit (parsed; its key from the memo)",
              sum(us for name, us in steps.items() if name.startswith(first_hit)))
    table.add("sum for its later hits (the hit lane)",
              sum(us for name, us in steps.items() if name.startswith(lane_hit)))
    table.add("the whole DaariApp call on a repeated hit (ASGI, no sockets; the hit lane)",
              trio.run(_whole_app_hit_us, raw, completion))
    table.notes.append("Not on a hit's path any more: classification (stored with the entry), replay events "
                       "(non-stream), the CacheActor round trip (the request peeks L0Memory), the disconnect "
                       "watcher (opened only on a miss)")
    table.notes.append("Hypercorn's own work (h11 parsing, the ASGI wrapper, socket I/O) is not in this table; "
                       "the bare-app row of the L0 table measures it")
    return [table]


def main() -> None:
    print_tables(run())


if __name__ == "__main__":
    main()
