"""Graceful shutdown's shared state: once it starts, connections waiting for a new request close at once and
answers in flight say `connection: close`; the server bounds how long those answers may still take."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio


class Shutdown:
    def __init__(self) -> None:
        self.started = False
        self._idle: set[trio.CancelScope] = set()

    def begin(self) -> None:
        self.started = True
        for scope in self._idle:
            scope.cancel()

    @contextmanager
    def while_idle(self) -> Iterator[trio.CancelScope]:
        """A scope shutdown cancels, around a connection's wait for its next request (until `busy`: once a head
        starts to arrive, that request is in flight)."""
        with trio.CancelScope() as scope:
            if self.started:
                scope.cancel()
            self._idle.add(scope)
            try:
                yield scope
            finally:
                self._idle.discard(scope)

    def busy(self, scope: trio.CancelScope) -> None:
        self._idle.discard(scope)
