"""`python -m bench.hit_cpu`: daari's own CPU per L0 hit, in one process, without sockets.

A real daari (actors, decision hub and its subscribers) runs in this process; its ASGI app is called
directly with a cached request, many times, and the event loop thread's CPU time per call is printed
(it starts once L1's model has loaded; worker threads excluded; the best of five runs, each followed by a pause so the
hub's subscribers handle what was published, their cost included). No network, no load client: the figure
moves only with daari's code, so it compares commits on a busy machine where request rates do not.
`--config '{"log": {"decisions": false}}'` merges into the config; `--no-subscribers` closes the decision
hub first (what the subscribers cost).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from daari.pipeline.steps.l1 import SemanticTier
from daari.server.compose import Parts
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

BODY = json.dumps({"model": "gpt-4o-mini", "temperature": 0, "messages": [
    {"role": "system", "content": "You are a helpful coding assistant."},
    {"role": "user", "content": "What does `git rebase -i HEAD~3` do?"}]}).encode()


async def measure(extra: dict[str, Any], no_subscribers: bool, calls: int) -> list[float]:
    tmp = Path(tempfile.mkdtemp(prefix="daari-hitcpu-"))
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp, tiers={"L3": upstream_tier("openai", upstream + "/v1", "good")}, **extra)
        async with daari_server(config) as server:
            app = server.parts.app
            await _l1_settled(server.parts)
            if no_subscribers:
                server.parts.decisions.close()
            scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
                     "headers": [(b"host", server.url.removeprefix("http://").encode()),
                                 (b"content-type", b"application/json"),
                                 (b"content-length", str(len(BODY)).encode())]}
            sent: list[dict[str, Any]] = []

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            async def call() -> None:
                # As Hypercorn calls an app: `receive` is a Trio memory channel's, the body already in it (a
                # small request arrives with its head), and the client stays (no disconnect).
                to_app, receive = trio.open_memory_channel[dict[str, Any]](10)
                # Hypercorn's two messages: the body with more_body set, then an empty one that ends it.
                to_app.send_nowait({"type": "http.request", "body": BODY, "more_body": True})
                to_app.send_nowait({"type": "http.request", "body": b"", "more_body": False})
                sent.clear()
                await app(dict(scope), receive.receive, send)

            await call()  # the miss that stores the answer
            await call()
            if dict(sent[0]["headers"]).get(b"x-daari-cache") != b"hit":
                raise RuntimeError(f"not an L0 hit: {sent[:1]}")
            runs = []
            for _ in range(5):
                start = time.thread_time()
                for _ in range(calls):
                    await call()
                    await trio.lowlevel.checkpoint()  # subscribers run between requests, as they would
                await trio.sleep(0.05)
                runs.append((time.thread_time() - start) / calls * 1e6)
            server.shutdown.set()
            return runs


async def _l1_settled(parts: Parts) -> None:
    """Wait until L1's embedding model has loaded (or failed): its loading thread holds the GIL for seconds,
    which would be charged to the first hits."""
    l1 = parts.shortcuts.get("L1")
    if isinstance(l1, SemanticTier):
        await l1.status.started.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="{}", help="JSON merged into the config")
    parser.add_argument("--no-subscribers", action="store_true")
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    runs = trio.run(measure, json.loads(args.config), args.no_subscribers, args.calls)
    print(f"CPU per L0 hit: {min(runs):.0f} us (best of {', '.join(f'{r:.0f}' for r in runs)})")


if __name__ == "__main__":
    main()
