"""`python -m bench.subscriber_cost`: what the decision hub's in-process subscribers cost an L0 hit.

bench.hit_cpu's harness (a real daari in this process, its ASGI app called directly), with the hub's
subscribers detached and attached again between runs that take turns: "none" (hub empty), each attached
subscriber alone, "all". Prints the event loop thread's CPU per hit for each (best and median of the rounds).
On the shared VM timings wander by several µs; for a deterministic figure run it under callgrind, which counts
instructions per mode (loop thread = the dumps' thread 1):

    valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes python -m bench.subscriber_cost --callgrind

(`--callgrind` switches instrumentation on around each mode's calls and dumps one profile per mode, named by
its mode in the dump's `desc: Trigger` line; the decision log's flush interval becomes 5 s so that its batches
keep their real-time size under valgrind's slowdown.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench.hit_cpu import BODY
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


def _callgrind(*args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


async def measure(calls: int, rounds: int, callgrind: bool) -> dict[str, list[float]]:
    tmp = Path(tempfile.mkdtemp(prefix="daari-subcost-"))
    log: dict[str, Any] = {"flush_interval_s": 5.0} if callgrind else {}
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp, tiers={"L3": upstream_tier("openai", upstream + "/v1", "good")}, log=log)
        async with daari_server(config) as server:
            app = server.parts.app
            hub = server.parts.decisions
            scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
                     "headers": [(b"host", server.url.removeprefix("http://").encode()),
                                 (b"content-type", b"application/json")]}
            delivered = {"body": False}

            async def receive() -> dict[str, Any]:
                if delivered["body"]:
                    await trio.sleep_forever()
                delivered["body"] = True
                return {"type": "http.request", "body": BODY, "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                pass

            async def call() -> None:
                delivered["body"] = False
                await app(dict(scope), receive, send)

            for _ in range(300):  # the miss, then warm hits
                await call()
                await trio.lowlevel.checkpoint()
            attached, subscriptions = hub._attached, list(hub._subscriptions)
            modes = {"none": ((), []), **{a.name: ((a,), []) for a in attached}, "all": (attached, subscriptions)}
            runs: dict[str, list[float]] = {mode: [] for mode in modes}
            if callgrind:
                _callgrind("-i", "on")
                rounds = 1
            for _ in range(rounds):
                for mode, (handlers, subs) in modes.items():
                    hub._attached, hub._subscriptions = handlers, list(subs)
                    await trio.sleep(0.3)  # what the previous mode queued is written
                    if callgrind:
                        _callgrind("-z")
                    start = time.thread_time()
                    for _ in range(calls):
                        await call()
                        await trio.lowlevel.checkpoint()
                    await trio.sleep(0.3)  # its batch written, in the figure
                    runs[mode].append((time.thread_time() - start) / calls * 1e6)
                    if callgrind:
                        _callgrind("-d", mode)
            if callgrind:
                _callgrind("-i", "off")
            hub._attached, hub._subscriptions = attached, subscriptions
            server.shutdown.set()
            return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--callgrind", action="store_true", help="run under valgrind --tool=callgrind (see above)")
    args = parser.parse_args()
    runs = trio.run(measure, args.calls, args.rounds, args.callgrind)
    for mode, values in runs.items():
        print(f"{mode:14s} CPU per L0 hit: best {min(values):5.1f} us, median {statistics.median(values):5.1f} us")


if __name__ == "__main__":
    main()
