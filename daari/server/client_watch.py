"""A client that leaves cancels its request: Hypercorn does not raise in the app when a client goes away, so a task
waits for `http.disconnect` and cancels the request's scope (DESIGN.md, "Client disconnect"). That task is started
only for a request still running a tick or two after it began: most are answered before, and never pay for it."""

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
ARMING_TASK = "client watch arming"
# A routed request still running after one to two ticks gets its watch task; a client that leaves sooner is noticed
# then (its `http.disconnect` waits on the request's queue). Short against what a watch is for (an upstream call of
# seconds), long against a pass-through answered in a few milliseconds, or in a few tens of them while 20
# connections share the loop (a request then waits its turn behind the others).
TICK_S = 0.1


class ClientWatches:
    """Each routed request's watch. Once `start` has given it the server's long-lived nursery (`run_server` does), a
    request entering its watch only enters a cancel scope and joins this tick's dict; the arming task (one for the
    server) wakes every `tick_s` while requests run, and starts a watch task in that nursery for each request that
    joined before the previous tick and is still running. The watch ends on the `http.disconnect` Hypercorn (and
    daari's h11 front end) reports when a request's stream closes (response complete or client gone), and cancels
    the request's scope only if the request is still running; the nursery's cancel at shutdown ends any left.

    Why not a task per request from the start: its spawn, its two task steps and its exit were ~8% of a pass-through
    request's CPU (docs/performance.md, "The route, the record and the way out"). A nursery opened and closed per
    request remains the way when no server nursery was given (the app called in process, whose caller may never
    send `http.disconnect`)."""

    def __init__(self, tick_s: float = TICK_S) -> None:
        self.tick_s = tick_s
        self._nursery: trio.Nursery | None = None
        self._young: dict[_Watched, None] = {}  # entered since the last tick
        self._old: dict[_Watched, None] = {}  # entered before it: armed at the next tick if still running
        self._idle: trio.Event | None = None  # set by the first request entering while the arming task waits

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        nursery.start_soon(self._arm, name=ARMING_TASK)

    def __call__(self, receive: Receive) -> Callable[[], AbstractAsyncContextManager[None]]:
        """Built for every request, entered only by routed ones: cheap (no scope until entered)."""
        server = self._nursery
        if server is None:
            return partial(_own_nursery, receive)
        return _Watched(self, server, receive)

    def _join(self, watched: _Watched) -> None:
        young = self._young
        young[watched] = None
        watched.joined = young
        idle = self._idle
        if idle is not None:
            self._idle = None
            idle.set()

    async def _arm(self) -> None:
        while True:
            if not self._young and not self._old:  # nothing running: no tick until a request enters
                idle = self._idle = trio.Event()
                await idle.wait()
            await trio.sleep(self.tick_s)
            old, self._old, self._young = self._old, self._young, {}
            for watched in old:  # no await in this loop: a request leaving meanwhile cannot change `old`
                watched.arm()

    @property
    def waiting(self) -> int:
        """Requests running unwatched, to be armed if they still run at the next tick or the one after."""
        return len(self._young) + len(self._old)


class _Watched:
    """A routed request under its (not yet armed) watch. A plain class, not an `asynccontextmanager` (a generator
    and its wrapper per request); calling it gives itself, the context manager `Turn.watch_client` asks for. The
    watch cancels nothing once the request is over (`done`): a Trio cancel recomputes its scope's status even for
    a scope already left."""

    __slots__ = ("_watches", "_server", "_receive", "scope", "done", "joined")

    def __init__(self, watches: ClientWatches, server: trio.Nursery, receive: Receive) -> None:
        self._watches = watches
        self._server = server
        self._receive = receive
        self.scope: trio.CancelScope | None = None
        self.done = False
        self.joined: dict[_Watched, None] | None = None  # the tick's dict it waits in until armed or left

    def __call__(self) -> _Watched:
        return self

    async def __aenter__(self) -> None:
        scope = self.scope = trio.CancelScope()
        scope.__enter__()
        self._watches._join(self)

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool:
        self.done = True
        joined = self.joined
        if joined is not None:
            joined.pop(self, None)  # a request armed already is in a dict the arming task has let go of
        assert self.scope is not None
        return self.scope.__exit__(kind, exc, tb)

    def arm(self) -> None:
        """The request still runs a tick after it entered: from now on its client's leaving cancels it."""
        self.joined = None
        if not self.done:
            self._server.start_soon(_watch, self._receive, self, name=WATCH_TASK)

    def cancel(self) -> None:
        if not self.done and self.scope is not None:
            self.scope.cancel()


async def _watch(receive: Receive, watched: _Watched) -> None:
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # the server's nursery must not fail with it: the request goes on unwatched
        log.debug("the client watch ended early", exc_info=True)
        return
    watched.cancel()


@asynccontextmanager
async def _own_nursery(receive: Receive) -> AsyncIterator[None]:
    async with trio.open_nursery() as own:
        own.start_soon(watch_disconnect, receive, own.cancel_scope, name=WATCH_TASK)
        yield
        own.cancel_scope.cancel()
