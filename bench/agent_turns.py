"""`python -m bench.agent_turns`: a coding agent's tool loop through daari, what each turn's miss costs, in one run.

An agent session as it goes over the wire (OpenAI chat shape): a long system prompt, eight tools, one user
request, then turn after turn the same history plus one more tool call and its result (a few KB of code each),
so every body is new (an L0 miss) and grows to ~`--turns` x 6.5 KB + 25 KB. Each turn is sent, one request at a
time, to the upstream directly and to daari five ways, in rotating order:

- cache off (`X-Daari-No-Cache: true`): parse, route, the upstream call, render;
- cache on, L1's embedding memo on (the default): an L1 miss; the tool loop's user turn is embedded once;
- cache on, memo off (`cache.l1.embed_memo_mb: 0`): an L1 miss that runs the embedding model every turn;
- cache on, L1 off (`cache.l1.enabled: false`): L0 only;
- cache on, each turn's lookup context given an entry first (the same turn with an unrelated user turn, sent
  before it and not timed): an L1 miss that runs the model and searches (a context no entry shares runs none).

"added" is a path's latency minus the direct call's for the same turn (paired); the table shows medians over
all sessions, for the session's first turn (the user turn is new: the model runs either way) and for the later
turns, and the cost of the largest bodies against the smallest with the cache off (the issue's "a new 110 KB
body adds <= 2 ms more than a small one"). Every session is new (its own salt), so nothing is a cache hit.

    python -m bench.agent_turns                     # 4 sessions of 16 turns
    python -m bench.agent_turns --sessions 6 --turns 20
    python -m bench.agent_turns --baseline /work/main   # every path on another checkout too, in the same rotation
    python -m bench.agent_turns --gap-ms 30            # a pause after each request (work after a reply settles)
    python -m bench.agent_turns --sched                # and what the scheduler did to daari's threads, per path
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from bench import thread_sched
from bench.report import Table, machine, print_tables
from bench.servers import Server, daari, dumps, fake_upstream, openai_tier, workdir
from bench.thread_sched import Stretch

WORDS = ("parse", "token", "buffer", "stream", "module", "config", "request", "answer", "session", "cache",
         "upstream", "schema", "handler", "result", "context", "window", "message", "tool", "repair", "index")
DIRECT = "direct"
PATHS = {  # name: (daari config overlay for cache, request headers)
    "cache off": ({}, {"X-Daari-No-Cache": "true"}),
    "L1 miss, memo on": ({}, {}),
    "L1 miss, memo off": ({"l1": {"embed_memo_mb": 0}}, {}),
    "L0 only (L1 off)": ({"l1": {"enabled": False}}, {}),
    "L1 miss, context held": ({}, {}),
}
HELD = "L1 miss, context held"  # each turn's context first given an entry by an unrelated user turn (not timed)
UNRELATED = "Summarize the plot of Hamlet in two sentences."


def filler(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 13) % len(WORDS)] + ("." if i % 11 == 10 else "") for i in range(words))


def code(seed: int, lines: int) -> str:
    """A file's worth of Python, different for every seed."""
    return "\n".join(f"def {WORDS[(seed + i) % len(WORDS)]}_{seed}_{i}(event, context):\n"
                     f"    return {{'status': {200 + i % 7}, 'body': event['{WORDS[i % len(WORDS)]}']}}"
                     for i in range(lines))


TOOLS = [{"type": "function", "function": {"name": name, "description": filler(i, 300), "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "command": {"type": "string"}},
    "required": ["path"]}}} for i, name in enumerate(("read_file", "edit_file", "bash", "grep", "glob", "write_file",
                                                      "todo", "web_fetch"))]
SYSTEM = "You are a coding agent working in the user's repository.\n" + filler(99, 900)


def session_bodies(salt: int, turns: int) -> list[bytes]:
    """The request bodies of one tool loop: turn t carries t tool calls and their results."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Session {salt}: the tests in parser_{salt}.py fail after my last change; "
                                    "find why and fix it."}]
    bodies = []
    for turn in range(turns):
        call_id = f"call_{salt}_{turn}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/module_{turn}.py"})}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": code(salt * 1000 + turn, 60)})
        bodies.append(dumps({"model": "tools", "temperature": 0, "tools": TOOLS, "messages": messages}))
    return bodies


def unrelated(body: bytes) -> bytes:
    """The same turn (system prompt, tools, tool calls and results: the lookup context) with another user turn."""
    request = json.loads(body)
    next(m for m in request["messages"] if m["role"] == "user")["content"] = UNRELATED
    return dumps(request)


def post(client: httpx.Client, body: bytes, headers: dict[str, str]) -> float:
    start = time.perf_counter()
    response = client.post("/v1/chat/completions", content=body, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"HTTP {response.status_code}: {response.text[:300]}")
    meta = response.json().get("daari_meta") or {}
    if meta.get("cache_hit"):
        raise RuntimeError("a benchmark turn was a cache hit: the bodies are meant to be new")
    return elapsed


def memo_hits(server: Server) -> float:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("daari_cache_l1_embed_memo_hits_total"))


BASELINE = " (baseline)"


def run(sessions: int, turns: int, baseline: Path | None = None, gap_ms: float = 0.0,
        sched: bool = False) -> list[Table]:
    """`baseline`: another checkout of daari; each path then runs on it too (its names end in BASELINE), in the
    same rotation, so the two are compared turn by turn under the same load. `gap_ms`: a pause after each request
    (an agent's own time between turns), so work a server does after its reply (L1 embedding an answer it
    stores) runs before the next request, not inside the next path's timing. `sched`: what Linux's scheduler did to
    each daari process's threads during each timed request (bench/thread_sched.py; read outside the timing)."""
    headers = {"content-type": "application/json"}
    paths = {**PATHS, **({name + BASELINE: spec for name, spec in PATHS.items()} if baseline is not None else {})}
    added: dict[str, list[tuple[int, int, float]]] = {name: [] for name in paths}  # (turn, body bytes, ms)
    scheduled: dict[str, list[tuple[int, Stretch]]] = {name: [] for name in paths}  # (turn, the server's threads)
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, ExitStack() as stack:
        servers: dict[str, Server] = {DIRECT: upstream}
        for name, (cache, _) in paths.items():
            if name.startswith("cache off"):
                continue
            config = {"server": {"grace_period_s": 1}, "tiers": {"L3": openai_tier(upstream.url, "tools")},
                      "cache": cache}
            tree = baseline if name.endswith(BASELINE) else None
            servers[name] = stack.enter_context(daari(config, tmp, ready_timeout_s=300, tree=tree))
        for suffix in ("", BASELINE) if baseline is not None else ("",):
            servers["cache off" + suffix] = servers["L1 miss, memo on" + suffix]
        clients = {name: stack.enter_context(httpx.Client(base_url=server.url, timeout=120))
                   for name, server in servers.items()}
        names = [DIRECT, *paths]
        for warm in session_bodies(10_000, 3):  # connections open, code paths and the models warm
            for name in names:
                post(clients[name], warm, {**headers, **paths.get(name, ({}, {}))[1]})
        memo_before = memo_hits(servers["L1 miss, memo on"])
        order = 0
        for session in range(sessions):
            for turn, body in enumerate(session_bodies(session + 1, turns)):
                order += 1
                rotated = names[order % len(names):] + names[:order % len(names)]
                took = {}
                for name in rotated:
                    if name.startswith(HELD):  # its answer is stored (and embedded after the reply) first
                        post(clients[name], unrelated(body), headers)
                        time.sleep(max(gap_ms, 50) / 1000)
                    pid = servers[name].process.pid if sched and name != DIRECT else None
                    before = thread_sched.snapshot(pid) if pid is not None else {}
                    took[name] = post(clients[name], body, {**headers, **paths.get(name, ({}, {}))[1]})
                    if pid is not None:
                        scheduled[name].append((turn, thread_sched.stretch(before, thread_sched.snapshot(pid))))
                    time.sleep(gap_ms / 1000)
                for name in paths:
                    added[name].append((turn, len(body), took[name] - took[DIRECT]))
        memo_used = memo_hits(servers["L1 miss, memo on"]) - memo_before
    table = Table(f"A tool loop through daari: added ms over the upstream directly (median of {sessions} sessions)",
                  ["path", "first turn", f"turns 2-{turns}", "smallest bodies", "largest bodies",
                   "largest - smallest"])
    quarter = max(1, turns // 4)
    for name, rows in added.items():
        first = [ms for turn, _, ms in rows if turn == 0]
        later = [ms for turn, _, ms in rows if turn > 0]
        small = [ms for turn, _, ms in rows if turn < quarter]
        large = [ms for turn, _, ms in rows if turn >= turns - quarter]
        table.add(name, statistics.median(first), statistics.median(later), statistics.median(small),
                  statistics.median(large), statistics.median(large) - statistics.median(small))
    sizes = [size for _, size, _ in added["cache off"]]
    table.notes += [
        f"bodies {min(sizes) / 1024:.0f}-{max(sizes) / 1024:.0f} KB (turn 1 to {turns}); smallest/largest bodies: "
        f"the first and last {quarter} turns of each session; one request at a time, paths in rotating order"
        + (f", {gap_ms:g} ms between requests" if gap_ms else ""),
        f"embedding memo hits counted by daari (memo on): {memo_used:.0f} of {sessions * (turns - 1)} later turns",
        "upstream: tests/fakes/openai_upstream.py (model tools: a text answer to a trailing tool result) on "
        "Hypercorn; client: httpx, keep-alive; " + machine(),
    ]
    for suffix in ("", BASELINE) if baseline is not None else ("",):
        l1, off = added["L1 miss, memo on" + suffix], added["cache off" + suffix]
        paired = [a[2] - b[2] for a, b in zip(l1, off, strict=True) if a[0] == 0]
        table.notes.append(f"an L1 miss over the cache off on a first turn{suffix}, paired by turn: median "
                           f"{statistics.median(paired):.2f} ms, mean {statistics.fmean(paired):.2f} ms "
                           f"({len(paired)} turns)")
        held = [a[2] - b[2] for a, b in zip(added[HELD + suffix], off, strict=True) if a[0] == 0]
        table.notes.append(f"an L1 miss in a context that holds an entry over the cache off on a first turn{suffix}, "
                           f"paired by turn: median {statistics.median(held):.2f} ms, mean "
                           f"{statistics.fmean(held):.2f} ms ({len(held)} turns)")
        l0 = added["L0 only (L1 off)" + suffix]
        paired = [a[2] - b[2] for a, b in zip(l0, off, strict=True)]
        table.notes.append(f"L0 only over the cache off{suffix}, paired by turn (every turn): median "
                           f"{statistics.median(paired):.2f} ms, mean {statistics.fmean(paired):.2f} ms "
                           f"({len(paired)} turns)")
    if baseline is not None:
        table.notes.append(f"rows ending in{BASELINE}: daari from {baseline}; the others: this checkout")
    return [table, _scheduler_table(scheduled)] if sched else [table]


def _scheduler_table(scheduled: dict[str, list[tuple[int, Stretch]]]) -> Table:
    table = Table("What the scheduler did to the daari process's threads during a first turn (medians per request)",
                  ["path", "requests", "run-queue wait ms (all its threads)", "preemptions (all its threads)"])
    for name, rows in scheduled.items():
        first = [s for turn, s in rows if turn == 0]
        if first:
            table.add(name, len(first), statistics.median(s.wait_ns for s in first) / 1e6,
                      statistics.median(s.preempted for s in first))
    table.notes.append("read from /proc/<pid>/task before and after each timed request, outside its timing")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=16)
    parser.add_argument("--baseline", type=Path, help="another checkout of daari: every path runs on it too")
    parser.add_argument("--gap-ms", type=float, default=0.0,
                        help="pause after each request, so a server's work after its reply is not timed in the next")
    parser.add_argument("--sched", action="store_true",
                        help="also what Linux's scheduler did to each daari process's threads per first turn")
    args = parser.parse_args()
    print_tables(run(args.sessions, args.turns, args.baseline, args.gap_ms, args.sched))


if __name__ == "__main__":
    main()
