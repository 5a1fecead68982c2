"""`python -m bench.l1_steps`: where an agent's first-turn L1 miss spends its wall time, step by step, in one process.

A real daari (L1 on, the embedding model loaded) with tests/fakes' OpenAI upstream served in the same process; its
ASGI app is called directly (no sockets) with the first turn of bench/agent_turns.py's tool loop, every session
new, one request at a time, two ways in alternating order:

- context held: the same turn with an unrelated user turn is sent first (not timed) and its answer stored, so
  the timed turn's lookup context holds an entry: L1 runs the model, searches and misses;
- no entry: the timed turn alone; its context holds no entry, so L1 misses without running the model.

Each request's wall time per pipeline step (awaits included), and inside L1 per actor call and for the model run
itself (onnxruntime on the EmbedderActor's worker thread), medians over the sessions; then the same model run with
no request around it (the same kind of text, on a worker thread from the same event loop, after the same pause),
and a worker thread's round trip with no work at all. With `--sched`, a second table shows what Linux's scheduler
did to the model run's threads, inside the held requests and alone (bench/thread_sched.py): whether onnxruntime's
worker and the thread that called it ran side by side or took turns on one CPU.

    python -m bench.l1_steps                  # 40 sessions each way
    python -m bench.l1_steps --sessions 80
    python -m bench.l1_steps --sched          # and what the scheduler did to the model run's threads
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from bench import thread_sched
from bench.agent_turns import session_bodies, unrelated
from bench.asgi_direct import call, post_scope
from bench.report import Table, machine, print_tables
from bench.step_timer import time_steps
from bench.thread_sched import Stretch
from daari.pipeline.steps.l1 import SemanticTier
from daari.protocol.openai_wire import parse_chat_request
from daari.semantic import minilm_onnx
from daari.semantic.fold import fold
from daari.semantic.minilm import load_minilm
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

PAUSE_S = 0.03  # after every request: what a reply leaves to do (the stored answer's embedding) is not timed
HELD, NO_ENTRY = "context held", "no entry"
MODEL_RUN = "    the model run (onnxruntime, on the embedder's worker thread)"


class TimedAddress:
    """An actor address whose calls' wall time is added to `spent` by message type; tells pass through."""

    def __init__(self, address: Any, spent: dict[str, float]) -> None:
        self.address = address
        self.spent = spent

    async def call(self, message: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await self.address.call(message, **kwargs)
        finally:
            key = f"  L1: {type(message).__name__} (actor call)"
            self.spent[key] = self.spent.get(key, 0.0) + time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self.address, name)


class ModelRuns:
    """`minilm_onnx.run` timed (wall) while `on`: it runs on a worker thread, so the sum is kept under a lock."""

    def __init__(self, sched: bool) -> None:
        self.on = False
        self.sched = sched  # take the scheduler's snapshots around each timed run (they cost ~1 ms each)
        self.seconds = 0.0
        self.session: Any = None
        # Each timed run's wall seconds and what the scheduler did to its threads, in requests and alone.
        self.in_requests: list[tuple[float, Stretch]] = []
        self.alone: list[tuple[float, Stretch]] = []
        self._lock = threading.Lock()
        self._run: Callable[[Any, Any], Any] = minilm_onnx.run
        minilm_onnx.run = self.run

    def run(self, onnx_session: Any, batch: Any) -> Any:
        self.session = onnx_session
        if not self.on:
            return self._run(onnx_session, batch)
        wall, result = self._scheduled(self.in_requests, lambda: self._run(onnx_session, batch))
        with self._lock:
            self.seconds += wall
        return result

    def bare(self, batch: Any) -> float:
        wall, _ = self._scheduled(self.alone, lambda: self._run(self.session, batch))
        return wall

    def _scheduled(self, into: list[tuple[float, Stretch]], run: Callable[[], Any]) -> tuple[float, Any]:
        """`run()` timed, with the scheduler's snapshots (if asked for) taken outside the timed stretch."""
        before = thread_sched.snapshot() if self.sched else {}
        started = time.perf_counter()
        result = run()
        wall = time.perf_counter() - started
        if self.sched:
            into.append((wall, thread_sched.stretch(before, thread_sched.snapshot(), threading.get_native_id())))
        return wall, result


async def measure(sessions: int, sched: bool = False) -> list[Table]:
    runs = ModelRuns(sched)
    tmp = Path(tempfile.mkdtemp(prefix="daari-l1-steps-"))
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp, tiers={"L3": upstream_tier("openai", upstream + "/v1", "tools")})
        async with daari_server(config) as server:
            parts = server.parts
            tier = parts.shortcuts["L1"]
            assert isinstance(tier, SemanticTier)
            with trio.fail_after(300):
                await tier.status.started.wait()
            spent: dict[str, float] = {}
            time_steps(parts.pipeline, spent, time.perf_counter, finish_prefix="after the answer: ")
            tier.embedder = TimedAddress(tier.embedder, spent)  # type: ignore[assignment]  # a timing proxy
            tier.cache = TimedAddress(tier.cache, spent)  # type: ignore[assignment]
            scope = post_scope(server.url, "/v1/chat/completions", [(b"content-type", b"application/json")])

            async def timed_call(body: bytes) -> float:
                started = time.perf_counter()
                await call(parts.app, scope, body)
                return time.perf_counter() - started

            rows: dict[str, list[dict[str, float]]] = {HELD: [], NO_ENTRY: []}
            warm = 4
            for i in range(sessions + warm):
                if i == warm:
                    runs.in_requests.clear()  # the warm-up's runs are not counted
                for way in ((HELD, NO_ENTRY) if i % 2 else (NO_ENTRY, HELD)):
                    body = session_bodies(20_000 + 2 * i + (way == HELD), 1)[0]
                    if way == HELD:
                        await timed_call(unrelated(body))
                        await trio.sleep(PAUSE_S)
                    spent.clear()
                    runs.on, runs.seconds = True, 0.0
                    whole = await timed_call(body)
                    runs.on = False
                    if i >= warm:
                        spent["(the whole request)"] = whole
                        spent[MODEL_RUN] = runs.seconds
                        rows[way].append(dict(spent))
                    await trio.sleep(PAUSE_S)
            bare = await _bare_runs(runs, sessions)
            hop = await _thread_round_trip(sessions)

    keys = [k for k in rows[HELD][0] if k != "(the whole request)"]
    keys += [k for k in rows[NO_ENTRY][0] if k not in keys and k != "(the whole request)"]
    table = Table(f"An agent's first turn, an L1 miss: wall ms per step (median of {sessions} sessions each way)",
                  ["step", f"{HELD} ms", f"{NO_ENTRY} ms"])
    for key in ["(the whole request)", *keys]:
        table.add(key, *(statistics.median(r.get(key, 0.0) for r in rows[way]) * 1000 for way in (HELD, NO_ENTRY)))
    if bare is not None:
        table.add("the same model run with no request around it (same process, worker thread)", bare * 1000, "")
    table.add("a worker thread's round trip with no work (`trio.to_thread`, after the same pause)", hop * 1000, "")
    return [table, _scheduler_table(runs)] if sched else [table]


def _scheduler_table(runs: ModelRuns) -> Table:
    """The model runs inside held requests and alone, with what Linux's scheduler did to their threads."""
    table = Table("The model run and the scheduler: medians per run (the caller is the embedder's worker thread; "
                  "onnxruntime's own worker runs beside it)",
                  ["model run", "runs", "wall ms", "run-queue wait ms (its threads)", "caller preempted",
                   "runs with every thread on one CPU"])
    for name, timed in (("inside a held request", runs.in_requests), ("alone", runs.alone)):
        if not timed:
            continue
        table.add(name, len(timed), statistics.median(w for w, _ in timed) * 1000,
                  statistics.median(s.wait_ns for _, s in timed) / 1e6,
                  statistics.median(s.preempted for _, s in timed),
                  f"{sum(1 for _, s in timed if s.one_cpu and s.threads > 1)} of {len(timed)}")
    return table


async def _bare_runs(runs: ModelRuns, sessions: int) -> float | None:
    """The model run alone on the same kind of text (a new session's first turn, as L1 embeds it), on a worker
    thread from the same event loop, each after the same pause as the requests."""
    if runs.session is None:
        return None
    minilm = load_minilm()  # the model the server loaded: the process keeps one
    walls = []
    for i in range(sessions):
        body = session_bodies(90_000 + i, 1)[0]
        text = fold(parse_chat_request(json.loads(body), {})).embed_text
        batch = minilm.encode_window([text])
        await trio.sleep(PAUSE_S)
        walls.append(await trio.to_thread.run_sync(runs.bare, batch))
    return statistics.median(walls)


async def _thread_round_trip(sessions: int) -> float:
    """What the Embed call's two thread hops cost without the model: a worker thread that does nothing, started
    from the event loop after the same pause as the requests (the loop asleep meanwhile, as during a request's
    wait for its embedding)."""
    walls = []
    for _ in range(sessions):
        await trio.sleep(PAUSE_S)
        started = time.perf_counter()
        await trio.to_thread.run_sync(lambda: None)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.l1_steps", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--sched", action="store_true",
                        help="also what Linux's scheduler did to each model run's threads (its snapshots, ~1 ms "
                             "each, then count in the Embed call's and the whole request's wall time)")
    args = parser.parse_args(argv)
    notes = [machine(), f"ASGI app called in process, the fake upstream in the same process (model \"tools\"), "
                        f"{PAUSE_S * 1000:.0f} ms between requests"]
    if args.sched:
        notes.append("--sched: the scheduler's snapshots are taken on the embedder's worker thread around each model "
                     "run, outside its own timing but inside the Embed call's and the whole request's")
    print_tables(trio.run(measure, args.sessions, args.sched), notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
