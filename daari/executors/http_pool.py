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

Its connections also send a request in one write: httpcore writes the head and then the body, two sends
that wake the upstream twice. `CoalescingStream` holds what is written until the response is read (or 64 KiB
gather), then sends it at once; a failed send is ignored there, as httpcore ignores it, so a server that
answered early and closed is still read.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx
from httpcore import AsyncNetworkBackend, AsyncNetworkStream

# The series whose `_assign_requests_to_connections` LinearPool restates; another one keeps its own pool.
RESTATED_SERIES = "1.0."
FLUSH_BYTES = 64 * 1024  # a body this large goes out as it is written, not held for the response


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


class CoalescingStream(AsyncNetworkStream):
    """A connection's stream that sends a request's writes together, when its response is first read.

    (The `timeout` parameters are httpcore's interface, hence the noqa.)"""

    def __init__(self, inner: AsyncNetworkStream) -> None:
        self._inner = inner
        self._pending = b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        self._pending += buffer
        if len(self._pending) >= FLUSH_BYTES:
            await self._flush(timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._pending:
            try:
                await self._flush(timeout)
            except httpcore.WriteError:
                pass  # as httpcore does after a failed write: the server may have answered before it closed
        return await self._inner.read(max_bytes, timeout)

    async def _flush(self, limit_s: float | None) -> None:
        pending, self._pending = self._pending, b""
        await self._inner.write(pending, limit_s)

    async def aclose(self) -> None:
        self._pending = b""
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> AsyncNetworkStream:  # noqa: ASYNC109
        await self._flush(timeout)
        return CoalescingStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class CoalescingBackend(AsyncNetworkBackend):
    """The pool's network backend, with each TCP connection's stream a `CoalescingStream`."""

    def __init__(self, inner: AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> AsyncNetworkStream:
        return CoalescingStream(await self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109
                                  socket_options: Iterable[Any] | None = None) -> AsyncNetworkStream:
        return CoalescingStream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class CookiesWhenSet(httpx.Cookies):
    """The client's cookie jar, read only when a response sets a cookie: httpx builds urllib shims of the
    request and response for every response (~16 us) to find no Set-Cookie in an upstream's answer."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


def read_cookies_when_set(client: httpx.AsyncClient) -> None:
    client._cookies = CookiesWhenSet(client.cookies)  # the same cookies; httpx's setter would re-wrap them


def use_linear_pool(client: httpx.AsyncClient) -> bool:
    """Give the client's own transport a `LinearPool` whose connections coalesce writes (proxy transports
    from the environment keep theirs).

    Only an httpx transport holding httpcore's plain HTTP/1.1 pool of the restated series changes; True when
    it did.
    """
    pool = getattr(client._transport, "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool or not httpcore.__version__.startswith(RESTATED_SERIES) \
            or pool._http2:
        return False
    pool.__class__ = LinearPool  # the same object and state; only the assignment pass differs
    pool._network_backend = CoalescingBackend(pool._network_backend)
    return True
