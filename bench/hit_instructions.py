"""`python -m bench.hit_instructions [REV]`: instructions per L0 hit under callgrind, this tree (and REV's).

CPU time per hit moves with the machine's load; an instruction count does not. The same driver (this file,
run by path) answers N cached requests through the app in one process, as Hypercorn would call it, under
`valgrind --tool=callgrind`, for two values of N; the difference of the two totals over the difference of N is
the instructions of one hit (start-up and imports cancel out; what start-up left alive is frozen first, so a
full garbage collection in one run and not the other does not swamp the difference). L1 is off, so its model
is not loaded under valgrind (a hit does not reach L1). REV's tree is exported with `git archive` and imported
instead of this one. Needs valgrind; one run takes minutes. Not a wall-clock figure: it counts what daari
executes, not how long the machine took.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BODY = json.dumps({"model": "gpt-4o-mini", "temperature": 0, "messages": [
    {"role": "system", "content": "You are a helpful coding assistant."},
    {"role": "user", "content": "What does `git rebase -i HEAD~3` do?"}]}).encode()
WARM = 50


async def drive(calls: int) -> None:
    """In the measured process: WARM hits, then `calls` more (only their count differs between the runs)."""
    import trio

    from tests.fakes.openai_upstream import FakeOpenAI
    from tests.fakes.serving import serve_app
    from tests.support import daari_server, make_config, upstream_tier

    tmp = Path(tempfile.mkdtemp(prefix="daari-hit-instr-"))
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp, tiers={"L3": upstream_tier("openai", upstream + "/v1", "good")},
                             cache={"l1": {"enabled": False}})
        async with daari_server(config) as server:
            app = _app(server)
            scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
                     "headers": [(b"host", server.url.removeprefix("http://").encode()),
                                 (b"content-type", b"application/json"),
                                 (b"content-length", str(len(BODY)).encode())]}
            sent: list[dict[str, Any]] = []

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            async def call() -> None:
                to_app, receive = trio.open_memory_channel[dict[str, Any]](10)
                # Hypercorn's two messages: the body with more_body set, then an empty one that ends it.
                to_app.send_nowait({"type": "http.request", "body": BODY, "more_body": True})
                to_app.send_nowait({"type": "http.request", "body": b"", "more_body": False})
                sent.clear()
                await app(dict(scope), receive.receive, send)

            for _ in range(WARM):
                await call()
            if dict(sent[0]["headers"]).get(b"x-daari-cache") != b"hit":
                raise RuntimeError(f"not an L0 hit: {sent[:1]}")
            # What is alive now is start-up's: frozen, so a full collection that falls into one run and not the
            # other scans only what the hits made (otherwise one such collection outweighs hundreds of hits).
            gc.collect()
            gc.freeze()
            for _ in range(calls):
                await call()
                await trio.lowlevel.checkpoint()  # the hub's subscribers run between requests
            await trio.sleep(0.2)
            server.shutdown.set()


def _app(server: Any) -> Any:
    parts = getattr(server, "parts", None)
    if parts is not None:
        return parts.app
    from daari.server.app import DaariApp  # a tree from before issue 27: the app was built on the Runtime

    return DaariApp(server.runtime)  # type: ignore[call-arg,arg-type,unused-ignore]


def instructions(tree: Path | None, calls: int) -> int:
    with tempfile.TemporaryDirectory(prefix="daari-cg-") as tmp:
        out = Path(tmp) / "cg.out"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tree or ROOT)}
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                        str(Path(__file__).resolve()), "--child", str(calls)],
                       cwd=tree or ROOT, env=env, check=True, capture_output=True)
        text = out.read_text(errors="replace")
    match = re.search(r"^summary:\s*(\d+)", text, re.M) or re.search(r"^totals:\s*(\d+)", text, re.M)
    if match is None:
        raise RuntimeError("callgrind wrote no summary")
    return int(match.group(1))


def per_hit(tree: Path | None, small: int, large: int) -> float:
    return (instructions(tree, large) - instructions(tree, small)) / (large - small)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", nargs="?", help="also measure this git revision (e.g. 49e1cd6)")
    parser.add_argument("--calls", type=int, nargs=2, default=(100, 400), metavar=("SMALL", "LARGE"))
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:  # the measured process: nothing of this tree's bench/ is imported (REV's may differ)
        import trio

        trio.run(drive, args.child)
        return
    from bench.report import Table, print_tables, ratio
    from bench.versus import exported, has_revision

    small, large = args.calls
    table = Table("Instructions per L0 hit (callgrind; the difference of two runs)", ["tree", "instructions/hit",
                                                                                        "vs this tree"])
    this = per_hit(None, small, large)
    table.add("this tree", f"{this:,.0f}", "1.00x")
    if args.rev:
        if not has_revision(args.rev):
            raise SystemExit(f"revision {args.rev} is not in this repository")
        with exported(args.rev) as tree:
            theirs = per_hit(tree, small, large)
        table.add(args.rev, f"{theirs:,.0f}", ratio(theirs, this))
    table.notes.append(f"runs of {WARM}+{large} and {WARM}+{small} hits, their difference over {large - small}; "
                       "L1 off (not on a hit's path); the app called as Hypercorn calls it")
    print_tables([table])


if __name__ == "__main__":
    main()
