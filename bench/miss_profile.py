"""`python -m bench.miss_profile`: where daari's CPU goes on an agent turn's miss, by body size, in one process.

A real daari runs in this process (L1 off unless `--l1`; the fake OpenAI upstream served in-process too, model
"tools"); its ASGI app is called directly, no sockets, with the first and the last body of bench/agent_turns.py's
tool loop (~30 KB and ~112 KB), `--calls` times each, with `X-Daari-No-Cache` unless `--cache`. Prints the event
loop thread's CPU per request and cProfile's cumulative times of daari's functions (the fake's own are listed
too, so they can be told apart). CPU time moves with the code, not with the machine's load; cProfile's own
overhead inflates every figure about alike.

    python -m bench.miss_profile                 # cache off
    python -m bench.miss_profile --cache --l1    # an L1 miss (the memo makes later loop turns skip the model)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

import trio

from bench.agent_turns import session_bodies
from bench.asgi_direct import call, post_scope
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


async def profile(calls: int, cache: bool, l1: bool, rows: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="daari-missprof-"))
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp, tiers={"L3": upstream_tier("openai", upstream + "/v1", "tools")},
                             cache={"l1": {"enabled": l1}})
        async with daari_server(config) as server:
            app = server.parts.app
            if l1:
                with trio.fail_after(300):
                    await server.parts.shortcuts["L1"].status.started.wait()  # type: ignore[attr-defined]
            headers = [(b"content-type", b"application/json")]
            if not cache:
                headers.append((b"x-daari-no-cache", b"true"))
            scope = post_scope(server.url, "/v1/chat/completions", headers)
            session = iter(range(1, 1_000_000))
            for label, pick in (("first turn", 0), ("last turn", -1)):
                # Every call a new session (a new body: never an L0 hit), the same turn of it.
                bodies = [session_bodies(next(session), 16)[pick] for _ in range(calls + 5)]
                for body in bodies[:5]:
                    await call(app, scope, body)
                profiler = cProfile.Profile()
                started = time.thread_time()
                profiler.enable()
                for body in bodies[5:]:
                    await call(app, scope, body)
                profiler.disable()
                cpu_ms = (time.thread_time() - started) / calls * 1e3
                print(f"## {label}: {len(bodies[-1]) / 1024:.0f} KB body, {cpu_ms:.2f} ms of this thread's CPU per "
                      f"request (profiled; the in-process fake upstream included)\n")
                out = io.StringIO()
                stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
                stats.print_stats(r"/daari/|/tests/fakes/", rows)
                text = out.getvalue()
                print(text[max(0, text.find("   ncalls")):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--cache", action="store_true", help="cache on (default: X-Daari-No-Cache)")
    parser.add_argument("--l1", action="store_true", help="L1 on (loads the embedding model)")
    parser.add_argument("--rows", type=int, default=35)
    args = parser.parse_args()
    trio.run(profile, args.calls, args.cache, args.l1, args.rows)


if __name__ == "__main__":
    main()
