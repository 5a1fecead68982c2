"""`python -m bench.wire_parse [REV]`: the CPU daari spends checking and reading a client's request body into
its neutral request (the parse step of every miss and of a first hit), at git revision REV and in this tree,
side by side in one run, on real clients' bodies (bench/wire_bodies.py).

REV's tree is exported with `git archive` (bench.versus.exported). Each tree runs in a worker interpreter of
its own (this file, with that tree first on PYTHONPATH, so `daari` is that tree's), and the two take turns in
short batches: for every body, a batch of `--calls` parses in REV's worker, then the same in this tree's, for
`--rounds` rounds. A batch is timed in the worker thread's CPU time (a busy machine's preemption does not count)
and each row shows the best batch of each tree, per parse, and the ratio. The default REV is the commit
before the declared wire schemas (issue 27).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

BEFORE_SCHEMAS = "4230299"  # main before the declared wire schemas (the hand-written checks)
PARSERS = {"openai": ("daari.protocol.openai_wire", "parse_chat_request"),
           "anthropic": ("daari.protocol.anthropic_wire", "parse_messages_request"),
           "responses": ("daari.protocol.responses_wire", "parse_responses_request")}


def _worker(bodies_file: str) -> None:
    """Reads `index calls` lines, parses that body `calls` times, answers the CPU microseconds per parse."""
    import importlib

    bodies = [(protocol, body) for _, protocol, body in json.loads(Path(bodies_file).read_text())]
    parsers = {p: getattr(importlib.import_module(module), fn) for p, (module, fn) in PARSERS.items()}
    for protocol, body in bodies:
        parsers[protocol](body, {})  # warm, and a body this tree refuses fails here
    print("ready", flush=True)
    for line in sys.stdin:
        index, calls = line.split()
        protocol, body = bodies[int(index)]
        parse = parsers[protocol]
        start = time.thread_time()
        for _ in range(int(calls)):
            parse(body, {})
        print((time.thread_time() - start) / int(calls) * 1e6, flush=True)


class _Worker:
    def __init__(self, tree: Path, bodies_file: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", str(bodies_file)],
                                        env=env, cwd=str(tree), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        self._stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        self._stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        if self._stdout.readline().strip() != "ready":
            raise RuntimeError(f"the worker for {tree} did not start")

    def batch(self, index: int, calls: int) -> float:
        self._stdin.write(f"{index} {calls}\n")
        self._stdin.flush()
        return float(self._stdout.readline())

    def close(self) -> None:
        self._stdin.close()
        self.process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("rev", nargs="?", default=BEFORE_SCHEMAS)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=50, help="parses per batch")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return _worker(args.worker)

    from bench.report import Table, print_tables, ratio
    from bench.servers import ROOT
    from bench.versus import exported, has_revision
    from bench.wire_bodies import bodies

    if not has_revision(args.rev):
        print(f"revision {args.rev} is not in this repository (fetch the full history to compare)")
        return None
    cases = bodies()
    best: dict[str, list[float]] = {name: [float("inf"), float("inf")] for name, _, _ in cases}
    with exported(args.rev) as tree, tempfile.TemporaryDirectory(prefix="daari-wire-parse-") as tmp:
        bodies_file = Path(tmp) / "bodies.json"
        bodies_file.write_text(json.dumps(cases))
        workers = [_Worker(tree, bodies_file), _Worker(ROOT, bodies_file)]
        try:
            for _ in range(args.rounds):
                for index, (name, _, _) in enumerate(cases):
                    for side, worker in enumerate(workers):
                        best[name][side] = min(best[name][side], worker.batch(index, args.calls))
        finally:
            for worker in workers:
                worker.close()
    table = Table(f"Checking and reading a request body into the neutral request: {args.rev} vs this tree (CPU us "
                  f"per parse, best batch of {args.rounds})",
                  ["body", "protocol", "bytes", f"{args.rev} us", "this tree us", f"this tree / {args.rev}"])
    for name, protocol, body in cases:
        old, new = best[name]
        table.add(name, protocol, len(json.dumps(body)), old, new, ratio(new, old))
    table.notes.append(f"batches of {args.calls} parses, the two trees' workers taking turns body by body; CPU time "
                       "of the worker thread")
    print_tables([table])
    return None


if __name__ == "__main__":
    main()
