"""Listen, accept, and give each connection its own task in a nursery the server owns; on the shutdown trigger
stop accepting, close idle connections and give answers in flight `server.grace_period_s` before cancelling."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio

from daari.config import ServerConfig
from daari.server.h11_front.connection import Connection
from daari.server.h11_front.lifespan import Lifespan
from daari.server.h11_front.shutdown import Shutdown

log = logging.getLogger("daari.server.h11")

App = Any


async def serve(app: App, settings: ServerConfig, *, shutdown_trigger: Callable[[], Awaitable[object]],
                task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve `app` on `settings.host:port` until `shutdown_trigger` returns (then gracefully) or until cancelled;
    `task_status` gets the bound URLs, as Hypercorn's `serve` gives them."""
    listeners = await trio.open_tcp_listeners(settings.port, host=settings.host, backlog=settings.backlog)
    urls = [_url(listener) for listener in listeners]
    shutdown = Shutdown()
    lifespan = Lifespan(app)
    async with trio.open_nursery() as server:
        await lifespan.startup(server)
        async with trio.open_nursery() as connections:
            accepting = trio.CancelScope()
            handler = partial(_connection, app=app, settings=settings, shutdown=shutdown)
            connections.start_soon(_accept, accepting, handler, listeners, connections)
            task_status.started(urls)
            await shutdown_trigger()
            log.info("the front end stopped accepting connections; %g s for answers in flight",
                     settings.grace_period_s)
            accepting.cancel()  # serve_listeners closes the listening sockets as it leaves
            shutdown.begin()
            connections.cancel_scope.deadline = trio.current_time() + settings.grace_period_s
        await lifespan.shutdown(settings.grace_period_s)
        server.cancel_scope.cancel()  # the app's lifespan task, if it did not end on shutdown


async def _accept(accepting: trio.CancelScope, handler: Callable[[trio.SocketStream], Awaitable[None]],
                  listeners: list[trio.SocketListener], connections: trio.Nursery) -> None:
    with accepting:
        await trio.serve_listeners(handler, listeners, handler_nursery=connections)


async def _connection(stream: trio.SocketStream, *, app: App, settings: ServerConfig, shutdown: Shutdown) -> None:
    await Connection(stream, app, settings, shutdown).run()


def _url(listener: trio.SocketListener) -> str:
    host, port = listener.socket.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
