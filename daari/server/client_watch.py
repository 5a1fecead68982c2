"""A client that leaves cancels its request: Hypercorn does not raise in the app when a client goes away, so a task
waits for `http.disconnect` and cancels the request's scope (DESIGN.md, "Client disconnect")."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from types import TracebackType

import trio

from daari.server.asgi_io import Receive, watch_disconnect

log = logging.getLogger(__name__)

WATCH_TASK = "client watch"


class ClientWatches:
    """Each routed request's watch task. Once `start` has given it the server's long-lived nursery (`run_server`
    does), a watch is a task started there: it ends on the `http.disconnect` Hypercorn puts on every request's
    queue when its stream closes (response complete or client gone), and cancels the request's scope only if the
    request is still running; the nursery's cancel at shutdown ends any left. A nursery opened and closed per
    request, with the cancel that ended its watcher, was ~10% of a pass-through request's CPU; it remains the way
    when no server nursery was given (the app called in process, whose caller may never send `http.disconnect`)."""

    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def __call__(self, receive: Receive) -> Callable[[], AbstractAsyncContextManager[None]]:
        return partial(self._watching, receive)  # built for every request, entered only by routed ones: cheap

    def _watching(self, receive: Receive) -> AbstractAsyncContextManager[None]:
        server = self._nursery
        if server is None:
            return _own_nursery(receive)
        return _Watched(server, receive)


class _Watched:
    """A routed request under its watch. A plain class, not an `asynccontextmanager` (a generator and its
    wrapper per request), and the watch cancels nothing once the request is over (`done`): a Trio cancel
    recomputes its scope's status even for a scope already left."""

    __slots__ = ("_server", "_receive", "scope", "done")

    def __init__(self, server: trio.Nursery, receive: Receive) -> None:
        self._server = server
        self._receive = receive
        self.scope = trio.CancelScope()
        self.done = False

    async def __aenter__(self) -> None:
        self.scope.__enter__()
        self._server.start_soon(_watch, self._receive, self, name=WATCH_TASK)

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool:
        self.done = True
        return self.scope.__exit__(kind, exc, tb)


async def _watch(receive: Receive, watched: _Watched) -> None:
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # the server's nursery must not fail with it: the request goes on unwatched
        log.debug("the client watch ended early", exc_info=True)
        return
    if not watched.done:
        watched.scope.cancel()


@asynccontextmanager
async def _own_nursery(receive: Receive) -> AsyncIterator[None]:
    async with trio.open_nursery() as own:
        own.start_soon(watch_disconnect, receive, own.cancel_scope, name=WATCH_TASK)
        yield
        own.cancel_scope.cancel()
