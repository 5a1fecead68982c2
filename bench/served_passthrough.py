"""`python -m bench.served_passthrough [REV]`: instructions per pass-through request (`X-Daari-No-Cache: true`) of the
served process, whole answers and streams, this tree against REV, the trees taking turns.

bench.passthrough_cpu counts daari's app called in process; this counts the whole served process (the front end,
h11, Trio and daari) as a client drives it, as bench.served_instructions does for an L0 hit. Each daari runs under
`valgrind --tool=callgrind --instr-atstart=no` (start-up not counted), one tier on tests/fakes' OpenAI upstream
(its own process, not counted), L1 off. Per turn: a few warm-up requests, instrumentation on, `--requests` whole
answers (the fake's "good" model, as `make bench-peers`' pass-through rows) over `--connections` keep-alive
connections, a dump; then `--requests` streams of the same answer (as bench.passthrough_cpu --stream), a dump.
Instruction counts move with the code, not with the machine's load. The decision log's writer is a child process
and is not counted. The served trees take turns: REV's first in odd rounds, this tree's first in even ones.

Under callgrind a request runs ~50x slower, so with the client watch's real tick (0.1 s) most requests would
outlive it and be armed, which none of a few milliseconds is at full speed: the served process starts with the
tick scaled by `CALLGRIND_SLOWDOWN` (as bench.passthrough_cpu --instructions does in process).

    python -m bench.served_passthrough main                      # Hypercorn (the default front end)
    python -m bench.served_passthrough main --front-end h11
    python -m bench.served_passthrough main --rounds 3 --keep /tmp/cg   # dumps kept for callgrind_annotate
    python -m bench.served_passthrough --profile 1000              # this tree's served process under cProfile

`--profile N`: no callgrind; the served process under cProfile, once started and stopped idle and once per kind with
N requests, the idle run's counts taken off: Python calls and own time per request by package and by function
(cProfile's wall clock, its overhead included: a guide to where daari's share is, not a measure).
"""

from __future__ import annotations

import argparse
import json
import pstats
import re
import shutil
import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.passthrough_cpu import CALLGRIND_SLOWDOWN, REQUEST
from bench.report import Table, print_tables
from bench.served_instructions import post_all
from bench.servers import PYTHON, Server, daari, dumps, fake_upstream, workdir
from bench.stream_relay import daari_config
from bench.versus import exported
from tests.support import upstream_tier

PATH = "/v1/chat/completions"
HEADERS = {"Content-Type": "application/json", "X-Daari-No-Cache": "true"}
KINDS = ("whole", "stream")

# The served process: daari's command with the client watch's tick scaled (see the module's docstring).
SHIM = ("import sys; from daari.server import client_watch as w; "
        f"w.ClientWatches.__init__.__defaults__ = (w.TICK_S * {CALLGRIND_SLOWDOWN},); "
        "from daari.cli import main; sys.exit(main())")


def bodies() -> dict[str, bytes]:
    return {"whole": dumps({**REQUEST, "stream": False}), "stream": dumps({**REQUEST, "stream": True})}


def send(server: Server, body: bytes, requests: int, connections: int) -> None:
    """`requests` POSTs over `connections` keep-alive connections at once; each answer read whole, a 200 with
    daari's meta in it."""
    post_all(server, body, requests, connections, HEADERS, must_hold=b"daari_meta")


def dumped(out: Path, label: str) -> int:
    """The instructions of the callgrind dump described as `label`."""
    for path in sorted(out.parent.glob(out.name + "*"), key=lambda p: p.stat().st_mtime, reverse=True):
        text = path.read_text(errors="replace")
        if re.search(rf"^desc: Trigger: dump {label}$", text, re.M):
            totals = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
            if totals:
                return int(totals.group(1))
    found = {p.name: re.findall(r"^desc: .*$", p.read_text(errors="replace"), re.M) for p in out.parent.glob("cg-*")}
    raise RuntimeError(f"no callgrind dump {label!r} in {out.parent}: {found}")


def turn(tree: Path | None, upstream_url: str, tmp: Path, n: int, requests: int, connections: int,
         front_end: str) -> dict[str, float]:
    """One served daari under callgrind: instructions per whole answer and per stream."""
    out = tmp / f"cg-{n}.out"
    launcher = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", PYTHON, "-c",
                SHIM]
    config = daari_config(upstream_tier("openai", upstream_url + "/v1", "good"),
                          front_end=None if front_end == "hypercorn" else front_end)
    config["tiers"]["L3"].update(max_concurrency=64, max_queue=64)
    result: dict[str, float] = {}
    with daari(config, tmp, tree=tree, launcher=launcher, ready_timeout_s=900) as proxy:
        pid = str(proxy.process.pid)
        sent = bodies()
        for kind in KINDS:
            send(proxy, sent[kind], connections * 3, connections)  # connections, pool and code paths warm
        subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
        for kind in KINDS:
            send(proxy, sent[kind], requests, connections)
            time.sleep(0.5)  # what a request queued for later (the decision log's hand-over) runs inside the count
            subprocess.run(["callgrind_control", f"--dump={kind}", pid], check=True, capture_output=True)
        subprocess.run(["callgrind_control", "--instr=off", pid], check=True, capture_output=True)
        for kind in KINDS:
            result[kind] = dumped(out, kind) / requests
    return result


def profiled(upstream_url: str, tmp: Path, kind: str, requests: int, front_end: str) -> Path:
    """The served process under cProfile: `requests` of `kind` after a warm-up ("idle": none at all)."""
    out = tmp / f"profile-{kind}.prof"
    config = daari_config(upstream_tier("openai", upstream_url + "/v1", "good"),
                          front_end=None if front_end == "hypercorn" else front_end)
    with daari(config, tmp, launcher=[PYTHON, "-m", "cProfile", "-o", str(out), "-m", "daari"]) as proxy:
        if kind != "idle":
            send(proxy, bodies()[kind], 20, 1)
            send(proxy, bodies()[kind], requests, 1)
    return out


def profile_report(upstream_url: str, tmp: Path, requests: int, front_end: str, rows: int,
                   keep: Path | None) -> None:
    from bench.hit_calls import package

    idle = pstats.Stats(str(profiled(upstream_url, tmp, "idle", 0, front_end))).stats  # type: ignore[attr-defined]
    for kind in KINDS:
        path = profiled(upstream_url, tmp, kind, requests, front_end)
        if keep:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, keep / path.name)
        loaded = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
        calls: Counter[str] = Counter()
        own: Counter[str] = Counter()
        by_function: list[tuple[float, float, str]] = []
        for key, (_cc, count, tottime, _cum, _callers) in loaded.items():
            before = idle.get(key, (0, 0, 0.0, 0.0, {}))
            n = (count - before[1]) / (requests + 20)
            t = (tottime - before[2]) / (requests + 20) * 1e6
            pkg = package(key[0])
            calls[pkg] += n
            own[pkg] += t
            by_function.append((t, n, f"{pkg} {Path(key[0]).name}:{key[1]}({key[2]})"))
        print(f"\n{kind}: Python calls per request {sum(calls.values()):,.0f}, own us per request "
              f"{sum(own.values()):,.0f} (cProfile's clock)")
        for pkg, count in calls.most_common():
            if count >= 0.5:
                print(f"  {pkg:14s} {count:8,.0f} calls {own[pkg]:8,.0f} us")
        for t, n, where in sorted(by_function, reverse=True)[:rows]:
            print(f"  {t:8.1f} us {n:6.1f}  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", nargs="?", help="also count daari at this git revision (the trees take turns)")
    parser.add_argument("--requests", type=int, default=200, help="counted requests of each kind per turn")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--front-end", default="hypercorn", choices=("hypercorn", "h11"))
    parser.add_argument("--keep", type=Path, metavar="DIR", help="copy the callgrind dumps here")
    parser.add_argument("--tree", type=Path, metavar="DIR",
                        help="serve this directory (a `git archive` of a commit) as \"this tree\", not the checkout")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile instead (see above)")
    parser.add_argument("--rows", type=int, default=40, help="with --profile: functions shown")
    args = parser.parse_args()
    if args.profile:
        with workdir() as tmp, fake_upstream("openai", tmp) as upstream:
            profile_report(upstream.url, tmp, args.profile, args.front_end, args.rows, args.keep)
        return
    runs: dict[str, list[dict[str, float]]] = {}
    with workdir() as tmp, fake_upstream("openai", tmp) as upstream, \
            (exported(args.rev) if args.rev else _no_tree()) as old_tree:
        trees: list[tuple[str, Path | None]] = [("this tree", args.tree)]
        if old_tree is not None:
            trees.insert(0, (args.rev, Path(old_tree)))
        n = 0
        for round_ in range(args.rounds):
            for label, tree in trees if round_ % 2 == 0 else reversed(trees):
                counts = turn(tree, upstream.url, tmp, n, args.requests, args.connections, args.front_end)
                n += 1
                runs.setdefault(label, []).append(counts)
                print(f"round {round_ + 1}, {label}: " + json.dumps({k: round(v) for k, v in counts.items()}),
                      flush=True)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for dump in tmp.glob("cg-*.out*"):
                shutil.copy(dump, args.keep / dump.name)
    table = Table(f"Instructions per pass-through request of the served process ({args.front_end}, "
                  f"{args.requests} per turn over {args.connections} connection(s), {args.rounds} turns each)",
                  ["tree", "whole answer (median)", "turns", "stream (median)", "turns"])
    medians: dict[str, dict[str, float]] = {}
    for label, per_turn in runs.items():
        medians[label] = {k: statistics.median(c[k] for c in per_turn) for k in KINDS}
        table.add(label, *[cell for k in KINDS for cell in (
            f"{medians[label][k]:,.0f}", " / ".join(f"{c[k]:,.0f}" for c in per_turn))])
    if len(medians) == 2:
        base, new = medians[trees[0][0]], medians["this tree"]
        table.notes.append("this tree / " + trees[0][0] + ": " +
                           ", ".join(f"{k} {new[k] / base[k]:.3f}x ({new[k] - base[k]:+,.0f})" for k in KINDS))
    print_tables([table])


class _no_tree:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


if __name__ == "__main__":
    main()
