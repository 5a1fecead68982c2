"""Serve an ASGI app on 127.0.0.1 with Hypercorn: inside a Trio test's nursery, or in a thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve


def _config() -> HypercornConfig:
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 0.1
    config.keep_alive_timeout = 30
    return config


@asynccontextmanager
async def serve_app(app: Any):  # type: ignore[no-untyped-def]
    """`async with serve_app(app) as base_url:` — the app listens until the block ends."""
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(serve, app, _config())
        yield binds[0]
        nursery.cancel_scope.cancel()


@contextmanager
def serve_app_in_thread(app: Any) -> Iterator[str]:
    """For sync tests (SDK clients, subprocesses): the app runs on its own Trio loop in a thread."""
    ready: dict[str, Any] = {}
    started = threading.Event()
    stop: list[trio.lowlevel.TrioToken] = []
    cancel: list[trio.CancelScope] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            cancel.append(scope)
            stop.append(trio.lowlevel.current_trio_token())
            async with trio.open_nursery() as nursery:
                ready["binds"] = await nursery.start(serve, app, _config())
                started.set()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("fake upstream did not start")
    try:
        yield ready["binds"][0]
    finally:
        stop[0].run_sync_soon(cancel[0].cancel)
        thread.join(5)
