"""The ASGI lifespan protocol: `lifespan.startup` before the first connection is accepted, `lifespan.shutdown`
after the last one ended. An app that raises on the lifespan scope is taken not to use it (as Hypercorn does)."""

from __future__ import annotations

import logging
from typing import Any

import trio

from daari.errors import StartupError

log = logging.getLogger("daari.server.h11")

App = Any


class Lifespan:
    def __init__(self, app: App) -> None:
        self.app = app
        self._to_app, self._app_inbox = trio.open_memory_channel[dict[str, Any]](2)
        self._started = trio.Event()
        self._stopped = trio.Event()
        self._failure: str | None = None

    async def startup(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._run)
        await self._to_app.send({"type": "lifespan.startup"})
        await self._started.wait()
        if self._failure is not None:
            raise StartupError(f"the app failed to start: {self._failure}")

    async def shutdown(self, timeout_s: float) -> None:
        if self._stopped.is_set():
            return
        await self._to_app.send({"type": "lifespan.shutdown"})
        with trio.move_on_after(timeout_s):
            await self._stopped.wait()

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        try:
            await self.app(scope, self._app_inbox.receive, self._send)
        except Exception:
            log.debug("the app does not take the lifespan scope", exc_info=True)
        finally:
            self._started.set()
            self._stopped.set()

    async def _send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            self._started.set()
        elif kind == "lifespan.startup.failed":
            self._failure = str(message.get("message", ""))
            self._started.set()
        elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            self._stopped.set()
