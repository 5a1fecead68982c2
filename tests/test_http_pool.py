"""LinearPool makes httpcore's pool decisions (reuse, keep-alive limit, expiry, server-closed sockets) over real
loopback connections; only its cost and when unused expired connections close differ. Its connections send a
request in one write."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpcore
import httpx
import trio

from daari.executors.http_pool import (
    FLUSH_BYTES,
    CoalescingStream,
    CookiesWhenSet,
    LinearPool,
    read_cookies_when_set,
    use_linear_pool,
)
from daari.server.asgi_io import answer_lifespan
from tests.fakes.serving import serve_app

RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok"


class TinyServer:
    """An HTTP/1.1 server on 127.0.0.1 that answers every request with "ok" and counts connections; with
    `close_after_answer` it closes each connection right after answering (no `Connection: close`), as a server
    whose keep-alive timeout passed does."""

    def __init__(self, close_after_answer: bool = False) -> None:
        self.close_after_answer = close_after_answer
        self.connections = 0
        self.bodies: list[bytes] = []
        self.url = ""

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        buffer = b""
        async with stream:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                length = next((int(line.split(b":", 1)[1]) for line in head.lower().split(b"\r\n")
                               if line.startswith(b"content-length:")), 0)
                while len(buffer) < length:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                self.bodies.append(buffer[:length])
                buffer = buffer[length:]
                await stream.send_all(RESPONSE)
                if self.close_after_answer:
                    return


@asynccontextmanager
async def tiny_server(close_after_answer: bool = False) -> AsyncIterator[TinyServer]:
    server = TinyServer(close_after_answer)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/"
        yield server
        nursery.cancel_scope.cancel()


def pool_of(client: httpx.AsyncClient) -> httpcore.AsyncConnectionPool:
    pool = client._transport._pool  # type: ignore[attr-defined]
    assert isinstance(pool, httpcore.AsyncConnectionPool)
    return pool


async def burst(client: httpx.AsyncClient, url: str, count: int) -> None:
    async def one() -> None:
        assert (await client.get(url)).text == "ok"

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)


async def test_a_default_client_gets_the_linear_pool_and_a_proxy_pool_stays_as_it_is() -> None:
    async with httpx.AsyncClient() as client:
        assert use_linear_pool(client)
        assert type(pool_of(client)) is LinearPool
    proxy_transport = httpx.AsyncHTTPTransport(proxy="http://127.0.0.1:9")
    async with httpx.AsyncClient(transport=proxy_transport) as proxied:
        assert not use_linear_pool(proxied)
        assert type(proxy_transport._pool) is httpcore.AsyncHTTPProxy


async def test_same_connections_as_httpcore_through_bursts_and_the_keep_alive_limit() -> None:
    """A burst of 6 opens 6 connections; afterwards idle ones close while more than 2 (the keep-alive limit)
    remain; sequential requests then reuse one of those, with either pool."""
    figures = []
    for linear in (False, True):
        async with tiny_server() as server, httpx.AsyncClient(
                limits=httpx.Limits(max_connections=8, max_keepalive_connections=2)) as client:
            if linear:
                assert use_linear_pool(client)
            await burst(client, server.url, 6)
            after_burst = server.connections
            for _ in range(5):
                assert (await client.get(server.url)).text == "ok"
            figures.append((after_burst, server.connections, len(pool_of(client).connections)))
    assert figures[0] == figures[1]
    assert figures[1] == (6, 6, 2)


async def test_a_full_pool_waits_for_a_connection_instead_of_opening_more() -> None:
    async with tiny_server() as server, httpx.AsyncClient(
            limits=httpx.Limits(max_connections=3, max_keepalive_connections=3)) as client:
        assert use_linear_pool(client)
        await burst(client, server.url, 12)
        assert server.connections == 3


async def test_an_idle_connection_the_server_closed_is_never_reused() -> None:
    """Between sweeps the connection about to be reused is still checked: the request goes on a new one
    instead of failing on a dead socket."""
    async with tiny_server(close_after_answer=True) as server, httpx.AsyncClient() as client:
        assert use_linear_pool(client)
        pool = pool_of(client)
        assert isinstance(pool, LinearPool)
        pool.sweep_interval_s = 3600.0
        for _ in range(4):
            assert (await client.get(server.url)).text == "ok"
            await trio.sleep(0.05)  # the server's close reaches our socket
        assert server.connections == 4


async def test_expired_idle_connections_close_at_the_next_sweep() -> None:
    """Idle connections to an origin nobody asks any more close once a sweep runs, not on every pass."""
    async with tiny_server() as first, tiny_server() as second, httpx.AsyncClient(
            limits=httpx.Limits(keepalive_expiry=0.0)) as client:
        assert use_linear_pool(client)
        pool = pool_of(client)
        assert isinstance(pool, LinearPool)
        pool.sweep_interval_s = 3600.0
        await burst(client, first.url, 3)
        pool._next_sweep = float("inf")  # no sweep for now
        assert (await client.get(second.url)).text == "ok"
        to_first = [c for c in pool.connections if c.can_handle_request(_origin(first.url))]
        assert len(to_first) == 3  # the first server's expired connections wait for a sweep
        pool._next_sweep = 0.0
        assert (await client.get(second.url)).text == "ok"
        assert not any(c.can_handle_request(_origin(first.url)) for c in pool.connections)
        assert all(c.is_closed() for c in to_first)


def _origin(url: str) -> httpcore.Origin:
    parsed = httpx.URL(url)
    assert parsed.port is not None
    return httpcore.Origin(b"http", parsed.host.encode(), parsed.port)


class RecordingStream(httpcore.AsyncNetworkStream):
    def __init__(self, answer: bytes = b"HTTP/1.1 200 OK", fail_writes: bool = False) -> None:
        self.writes: list[bytes] = []
        self.answer = answer
        self.fail_writes = fail_writes

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if self.fail_writes:
            raise httpcore.WriteError("connection reset")
        self.writes.append(buffer)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        return self.answer


async def test_a_request_goes_out_in_one_write_when_its_response_is_read() -> None:
    inner = RecordingStream()
    stream = CoalescingStream(inner)
    await stream.write(b"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n")
    await stream.write(b"{}")
    await stream.write(b"")  # h11's end of a content-length body
    assert inner.writes == []
    assert await stream.read(65536) == b"HTTP/1.1 200 OK"
    assert inner.writes == [b"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}"]
    await stream.read(65536)
    assert len(inner.writes) == 1  # nothing more to send


async def test_a_large_body_is_sent_as_it_is_written() -> None:
    inner = RecordingStream()
    stream = CoalescingStream(inner)
    await stream.write(b"head\r\n\r\n")
    await stream.write(b"x" * FLUSH_BYTES)
    assert inner.writes == [b"head\r\n\r\n" + b"x" * FLUSH_BYTES]


async def test_a_failed_send_still_reads_what_the_server_answered_before_closing() -> None:
    inner = RecordingStream(answer=b"HTTP/1.1 413 Payload Too Large", fail_writes=True)
    stream = CoalescingStream(inner)
    await stream.write(b"POST / HTTP/1.1\r\n\r\n")
    assert await stream.read(65536) == b"HTTP/1.1 413 Payload Too Large"


async def test_posts_with_bodies_arrive_whole_on_one_kept_alive_connection() -> None:
    async with tiny_server() as server, httpx.AsyncClient() as client:
        assert use_linear_pool(client)
        for n in range(3):
            response = await client.post(server.url, content=b"body %d" % n)
            assert response.text == "ok"
        large = b"y" * (FLUSH_BYTES * 3 + 17)
        assert (await client.post(server.url, content=large)).text == "ok"
        assert server.bodies == [b"body 0", b"body 1", b"body 2", large]
        assert server.connections == 1


async def test_cookies_an_upstream_sets_are_still_kept_and_sent_back() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        cookie = dict(scope["headers"]).get(b"cookie", b"")
        headers = [(b"content-type", b"text/plain")]
        if scope["path"] == "/set":
            headers.append((b"set-cookie", b"affinity=node-7; Path=/"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": cookie})

    async with serve_app(app) as url, httpx.AsyncClient() as client:
        read_cookies_when_set(client)
        assert isinstance(client.cookies, CookiesWhenSet)
        assert (await client.get(url + "/plain")).text == ""
        assert len(client.cookies.jar) == 0
        await client.get(url + "/set")
        assert client.cookies.get("affinity") == "node-7"
        assert (await client.get(url + "/echo")).text == "affinity=node-7"
