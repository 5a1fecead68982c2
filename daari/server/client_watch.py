"""A client that leaves cancels its request: Hypercorn does not raise in the app when a client goes away, so a task
waits for `http.disconnect` and cancels the request's scope (DESIGN.md, "Client disconnect")."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

import trio

from daari.server.asgi_io import Receive, watch_disconnect

log = logging.getLogger(__name__)

WATCH_TASK = "client watch"


class ClientWatches:
    """Each routed request's watch task. Once `start` has given it the server's long-lived nursery (`run_server`
    does), a watch is a task started there: it ends on the `http.disconnect` Hypercorn puts on every request's
    queue when its stream closes (response complete or client gone), cancelling a scope that is by then closed,
    and the nursery's cancel at shutdown ends any left. A nursery opened and closed per request, with the cancel
    that ended its watcher, was ~10% of a pass-through request's CPU; it remains the way when no server nursery
    was given (the app called in process, whose caller may never send `http.disconnect`)."""

    def __init__(self) -> None:
        self._nursery: trio.Nursery | None = None

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def __call__(self, receive: Receive) -> Callable[[], AbstractAsyncContextManager[None]]:
        return partial(self._watching, receive)  # built for every request, entered only by routed ones: cheap

    @asynccontextmanager
    async def _watching(self, receive: Receive) -> AsyncIterator[None]:
        server = self._nursery
        if server is None:
            async with trio.open_nursery() as own:
                own.start_soon(watch_disconnect, receive, own.cancel_scope, name=WATCH_TASK)
                yield
                own.cancel_scope.cancel()
            return
        with trio.CancelScope() as request_scope:
            server.start_soon(_watch, receive, request_scope, name=WATCH_TASK)
            yield


async def _watch(receive: Receive, request_scope: trio.CancelScope) -> None:
    try:
        await watch_disconnect(receive, request_scope)
    except Exception:  # the server's nursery must not fail with it: the request goes on unwatched
        log.debug("the client watch ended early", exc_info=True)
