"""httpcore's connection pool with a cheaper assignment pass: the same connection is reused, made or closed.

httpcore 1.0 runs `_assign_requests_to_connections` at least twice a request (a request queued, a response
closed). Each pass polls the socket of every idle connection (`has_expired`: a server may have closed it),
builds a list of every connection for each idle one only to count them (N² `is_idle` calls: ~480 a request
through a pool of 20 connections to one upstream), and lists all available and all idle connections for each
queued request to use the first of each. After a burst of 20 requests an upstream tier keeps ~20 idle
connections, so every later request paid ~40 socket polls and ~500 calls for bookkeeping.

`LinearPool` counts once and stops at the first match, and polls idle sockets only where it matters: the idle
connection about to be reused is always checked first (an expired or server-closed one is closed and the next
is tried, as before), while the sweep that closes the other expired idle connections runs at most once per
`sweep_interval_s`, so those close up to that much later than they used to. Every other rule is httpcore's,
in its order, including closing idle connections while the pool holds more than `max_keepalive_connections`.
"""

from __future__ import annotations

import time

import httpcore
import httpx

# The series whose `_assign_requests_to_connections` LinearPool restates; another one keeps its own pool.
RESTATED_SERIES = "1.0."


class LinearPool(httpcore.AsyncConnectionPool):
    sweep_interval_s = 1.0
    _next_sweep = 0.0  # class defaults: a pool becomes a LinearPool by a class change, without __init__

    def _assign_requests_to_connections(self) -> list[httpcore.AsyncConnectionInterface]:
        closing: list[httpcore.AsyncConnectionInterface] = []
        connections = self._connections
        now = time.monotonic()
        sweep = now >= self._next_sweep
        if sweep:
            self._next_sweep = now + self.sweep_interval_s
        for connection in list(connections):
            if connection.is_closed():
                connections.remove(connection)
            elif sweep and connection.has_expired():
                # Only an idle connection can have expired (a busy one has no keep-alive deadline and its
                # socket is its request's to read), so between sweeps `_reusable` checks the one it hands out.
                connections.remove(connection)
                closing.append(connection)
            elif len(connections) > self._max_keepalive_connections and connection.is_idle():
                connections.remove(connection)
                closing.append(connection)
        for pool_request in [request for request in self._requests if request.is_queued()]:
            origin = pool_request.request.url.origin
            available = self._reusable(origin, closing, checked=sweep)
            if available is not None:
                pool_request.assign_to_connection(available)
            elif len(connections) < self._max_connections:
                connection = self.create_connection(origin)
                connections.append(connection)
                pool_request.assign_to_connection(connection)
            else:
                idle = next((c for c in connections if c.is_idle()), None)
                if idle is not None:  # the pool is full: an idle connection (to another origin) makes room
                    connections.remove(idle)
                    closing.append(idle)
                    connection = self.create_connection(origin)
                    connections.append(connection)
                    pool_request.assign_to_connection(connection)
        return closing

    def _reusable(self, origin: httpcore.Origin, closing: list[httpcore.AsyncConnectionInterface], *,
                  checked: bool) -> httpcore.AsyncConnectionInterface | None:
        """The first connection that can take a request to `origin`; an idle one not swept in this pass is
        checked first, and closed if it expired or its server closed it."""
        for connection in list(self._connections):
            if not (connection.can_handle_request(origin) and connection.is_available()):
                continue
            if not checked and connection.is_idle() and connection.has_expired():
                self._connections.remove(connection)
                closing.append(connection)
                continue
            return connection
        return None


def use_linear_pool(client: httpx.AsyncClient) -> bool:
    """Give the client's own transport a `LinearPool` (proxy transports from the environment keep theirs).

    Only an httpx transport holding httpcore's plain pool of the restated series changes; True when it did.
    """
    pool = getattr(client._transport, "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool or not httpcore.__version__.startswith(RESTATED_SERIES):
        return False
    pool.__class__ = LinearPool  # the same object and state; only the assignment pass differs
    return True
