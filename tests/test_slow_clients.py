"""Slow and oversized clients against a running daari, over raw sockets: a head sent 1 byte at a time, a body
that trickles in, heads too large or with too many fields, a body past the limit. Each is closed (or refused in
the client's shape) while other clients keep being answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

CHAT = {"model": "good", "messages": [{"role": "user", "content": "hello"}]}
LIMITS = {"header_timeout_s": 1.0, "body_timeout_s": 1.0, "max_body_bytes": 64 * 1024}


async def connect(url: str) -> trio.SocketStream:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port))


async def read_until_closed(stream: trio.SocketStream) -> bytes:
    """Everything the server sends until it closes (a reset counts as closed)."""
    received = b""
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except trio.BrokenResourceError:
            return received
        if not chunk:
            return received
        received += chunk


def response_json(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


async def keep_asking(client: httpx.AsyncClient, statuses: list[int], done: trio.Event) -> None:
    """A well-behaved client beside the slow ones: its requests keep being answered."""
    while not done.is_set():
        statuses.append((await client.post("/v1/chat/completions", json=CHAT)).status_code)
        await trio.sleep(0.05)


@pytest.fixture
async def server_and_client(tmp_path: Path):  # type: ignore[no-untyped-def]
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")}, server=LIMITS)
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            yield server, client


async def test_slowloris_heads_are_closed_while_others_are_answered(server_and_client: Any) -> None:
    server, client = server_and_client
    closed: list[bool] = []

    async def slowloris() -> None:
        stream = await connect(server.url)
        head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 10_000
        try:
            for byte in head:  # one byte at a time, never the blank line that ends a head
                await stream.send_all(bytes([byte]))
                await trio.sleep(0.1)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        closed.append(await read_until_closed(stream) == b"")  # closed with no answer at all
        await stream.aclose()

    statuses: list[int] = []
    done = trio.Event()
    with trio.fail_after(60):  # generous: the configured limit is 1 s
        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_asking, client, statuses, done)
            async with trio.open_nursery() as slow:
                for _ in range(20):
                    slow.start_soon(slowloris)
            done.set()
    assert closed == [True] * 20
    assert statuses and set(statuses) == {200}


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/chat/completions", CHAT),
    ("/v1/messages", {"model": "good", "max_tokens": 10, "messages": [{"role": "user", "content": "hello"}]}),
])
async def test_a_body_that_trickles_in_gets_408_in_the_clients_shape(server_and_client: Any, path: str,
                                                                      body: dict[str, Any]) -> None:
    server, client = server_and_client
    payload = json.dumps(body).encode()
    statuses: list[int] = []
    done = trio.Event()
    stream = await connect(server.url)

    async def trickle() -> None:
        await stream.send_all(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              f"Content-Length: {len(payload)}\r\n\r\n".encode())
        try:
            for byte in payload:  # ~8 s for the whole body; the limit is 1 s
                await stream.send_all(bytes([byte]))
                await trio.sleep(0.1)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_asking, client, statuses, done)
            async with trio.open_nursery() as connection:
                connection.start_soon(trickle)
                received = await read_until_closed(stream)  # the answer, then the server closes
                connection.cancel_scope.cancel()
            done.set()
    status, error = response_json(received)
    assert status == 408
    if path == "/v1/messages":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        assert "body_timeout_s" in error["error"]["message"]
    else:
        assert error["error"]["type"] == "invalid_request_error" and error["error"]["code"] == "request_timeout"
    assert statuses and set(statuses) == {200}


async def test_a_body_past_the_limit_is_refused_while_it_is_still_arriving(server_and_client: Any) -> None:
    """A chunked body with no declared length: daari answers 413 once it has read past max_body_bytes, without
    waiting for (or holding) the rest; the client never finishes sending it."""
    server, _ = server_and_client
    stream = await connect(server.url)
    sent = 0

    async def endless_body() -> None:
        nonlocal sent
        await stream.send_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"4000\r\n" + b" " * 0x4000 + b"\r\n"  # 16 KiB chunks, forever (never the last chunk)
        try:
            while True:
                await stream.send_all(chunk)
                sent += 0x4000
                await trio.sleep(0.01)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    with trio.fail_after(60):
        async with trio.open_nursery() as connection:
            connection.start_soon(endless_body)
            received = await read_until_closed(stream)
            connection.cancel_scope.cancel()
    status, error = response_json(received)
    assert status == 413 and error["error"]["code"] == "request_too_large"
    assert sent < 64 * 1024 * 8  # refused long before the client could have sent much more


async def test_heads_over_the_size_or_field_limit_are_refused(server_and_client: Any) -> None:
    server, client = server_and_client

    async def ask(head: bytes) -> bytes:
        stream = await connect(server.url)
        try:
            await stream.send_all(head)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        with trio.fail_after(30):
            received = await read_until_closed(stream)
        await stream.aclose()
        return received

    base = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    huge = await ask(base + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n")
    assert not huge.startswith(b"HTTP/1.1 200")
    assert huge == b"" or huge.startswith(b"HTTP/1.1 431")  # refused by the HTTP parser, or reset with it
    big = await ask(base + b"X-Big: " + b"a" * 40_000 + b"\r\n\r\n")  # one read, past max_header_bytes
    status, error = response_json(big)
    assert status == 431 and error["error"]["code"] == "headers_too_large"
    many = await ask(base + b"".join(b"X-Field-%d: v\r\n" % i for i in range(150)) + b"\r\n")
    status, error = response_json(many)
    assert status == 431 and "max_headers" in error["error"]["message"]
    fine = await ask(base + b"".join(b"X-Field-%d: %s\r\n" % (i, b"v" * 100) for i in range(50)) + b"\r\n")
    assert fine.startswith(b"HTTP/1.1 200")
    assert (await client.get("/healthz")).status_code == 200
