"""The lean upstream client (daari/executors/lean_http.py) against real servers on 127.0.0.1: Python's http.server
(head and body in two writes, no TCP_NODELAY: the delayed-ACK case of issue 23) and a raw Trio server that records
what arrives. Behaviour, never timings: the request arrives in one write, the socket options are set, connections
are reused, closed or replaced as the server's framing says."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from daari.executors.lean_http import DRAIN_S, MAX_HEAD_BYTES, ChunkedBody, LeanClient, _parse_head
from daari.executors.upstream_http import lean_applies, open_client
from tests.support import daari_server, make_config, upstream_tier

ANSWER = json.dumps({"id": "x", "object": "chat.completion", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}).encode()


class WriteWriteHandler(http.server.BaseHTTPRequestHandler):
    """Answers like many small servers do: the head flushed in one write, the body in a second, Nagle left on."""

    protocol_version = "HTTP/1.1"
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.bodies.append(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        if self.path == "/chunked":
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for piece in (ANSWER[:10], ANSWER[10:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("content-length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, *args: object) -> None:
        pass


class OldHandler(WriteWriteHandler):
    protocol_version = "HTTP/1.0"  # no length: the body ends when the server closes


@contextmanager
def http_server(handler: type[http.server.BaseHTTPRequestHandler] = WriteWriteHandler) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class RawServer:
    """Records what each connection's first receive held; answers each request with `reply` (raw bytes)."""

    def __init__(self, reply: bytes, close_after: bool = False) -> None:
        self.reply = reply
        self.close_after = close_after
        self.first_reads: list[bytes] = []
        self.connections = 0
        self.url = ""

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        async with stream:
            while True:
                data = await stream.receive_some(1 << 20)
                if not data:
                    return
                self.first_reads.append(data)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                               if line.startswith(b"content-length:")), 0)
                while len(body) < length:  # not one write: keep reading, the test then fails on first_reads
                    more = await stream.receive_some(1 << 20)
                    if not more:
                        return
                    body += more
                await stream.send_all(self.reply)
                if self.close_after:
                    return


@asynccontextmanager
async def raw_server(reply: bytes, close_after: bool = False) -> AsyncIterator[RawServer]:
    server = RawServer(reply, close_after)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        yield server
        nursery.cancel_scope.cancel()


def ok(body: bytes, *extra: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), b"".join(e + b"\r\n" for e in extra),
                                                                    body)


async def test_a_write_write_server_answers_and_the_connection_is_reused() -> None:
    client = LeanClient(connect_timeout_s=5)
    with http_server() as url:
        for path in ("/v1/chat/completions", "/chunked", "/v1/chat/completions"):
            async with client.stream("POST", url + path, json={"n": 1}, headers={"x-a": "b"}) as response:
                assert response.status_code == 200
                assert json.loads(await response.aread()) == json.loads(ANSWER)
    assert client.connections_made == 1  # one keep-alive connection for all three
    await client.aclose()


async def test_socket_options_against_delayed_acks() -> None:
    """TCP_NODELAY on daari's socket, and TCP_QUICKACK re-armed after each write and read: the server's body,
    held by its Nagle until its head is ACKed, is not left waiting on a delayed ACK of ours. (Linux enters
    delayed-ACK mode when a request follows an answer on the same connection: the option reads 0 after such a
    send unless it was re-armed.)"""
    quickack = getattr(socket, "TCP_QUICKACK", None)
    client = LeanClient(connect_timeout_s=5)
    request = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}"
    with http_server() as url:
        conn = await client._connect(("127.0.0.1", int(url.rsplit(":", 1)[1])))
        assert conn.raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        for _ in range(3):
            await conn.send(request)
            if quickack is not None:
                assert conn.raw.getsockopt(socket.IPPROTO_TCP, quickack) == 1
            received = b""
            while not received.endswith(ANSWER):
                received += await conn.receive()
        conn.close()


async def test_the_request_goes_out_in_one_write() -> None:
    body = b"x" * 30_000
    async with raw_server(ok(b"{}")) as server:
        client = LeanClient(connect_timeout_s=5)
        response = await client.post(server.url + "/v1/messages?beta=true", content=body,
                                      headers={"content-type": "application/json", "authorization": "Bearer k"})
        assert response.content == b"{}"
        [first] = server.first_reads
        assert first.startswith(b"POST /v1/messages?beta=true HTTP/1.1\r\nhost: 127.0.0.1:")
        assert b"\r\ncontent-length: 30000\r\n" in first and b"\r\nauthorization: Bearer k\r\n" in first
        assert first.endswith(b"\r\n\r\n" + body)  # head and body together, in the first read
        await client.aclose()


async def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    async with raw_server(ok(b"a"), close_after=True) as server:
        client = LeanClient(connect_timeout_s=5)
        for _ in range(3):
            assert (await client.post(server.url, content=b"")).content == b"a"
            await trio.sleep(0.05)  # the server's FIN arrives: the peek sees it before the next request
        assert server.connections == 3
        await client.aclose()


async def test_connection_close_and_read_until_close() -> None:
    async with raw_server(ok(b"a", b"connection: close")) as server:
        client = LeanClient(connect_timeout_s=5)
        assert (await client.post(server.url, content=b"")).content == b"a"
        assert not client._idle.get(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
        await client.aclose()
    with http_server(OldHandler) as url:  # HTTP/1.0, no keep-alive
        client = LeanClient(connect_timeout_s=5)
        for _ in range(2):
            response = await client.post(url + "/x", json={})
            assert json.loads(response.content) == json.loads(ANSWER)
        assert client.connections_made == 2
        await client.aclose()


async def test_a_body_cut_short_is_an_error_and_the_connection_is_not_pooled() -> None:
    async with raw_server(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", close_after=True) as server:
        client = LeanClient(connect_timeout_s=5)
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(server.url, content=b"")
        assert not any(client._idle.values())


async def test_leaving_mid_body_closes_the_connection() -> None:
    async with raw_server(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n") as server:
        client = LeanClient(connect_timeout_s=5)
        async with client.stream("POST", server.url, content=b"") as response:
            async for piece in response.aiter_bytes():
                assert piece == b"abc"
                break
        assert not any(client._idle.values())


class LateEndServer(RawServer):
    """Answers a stream whose protocol-level end (`data: [DONE]`) comes before the HTTP body's end: the terminal
    chunk is written `delay_s` after, as an ASGI server's last send is."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\ne\r\ndata: [DONE]\n\n\r\n")
        self.delay_s = delay_s

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        async with stream:
            while await stream.receive_some(1 << 20):
                await stream.send_all(self.reply)
                await trio.sleep(self.delay_s)
                await stream.send_all(b"0\r\n\r\n")


@asynccontextmanager
async def late_end_server(delay_s: float) -> AsyncIterator[LateEndServer]:
    server = LateEndServer(delay_s)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        yield server
        nursery.cancel_scope.cancel()


async def test_a_stream_left_at_its_done_event_keeps_its_connection() -> None:
    """An executor stops reading at `[DONE]`; the terminal chunk that follows is read and dropped on leaving,
    so the next stream reuses the connection instead of paying a new one (issue 23's TTFT)."""
    async with late_end_server(0.01) as server:
        client = LeanClient(connect_timeout_s=5)
        for _ in range(3):
            async with client.stream("POST", server.url, content=b"{}") as response:
                async for piece in response.aiter_bytes():
                    assert piece == b"data: [DONE]\n\n"
                    break
        assert client.connections_made == 1
        assert server.connections == 1
        await client.aclose()


async def test_a_rest_that_does_not_come_soon_is_not_waited_for() -> None:
    """The body's end not there within DRAIN_S of the caller leaving: the connection is closed, not waited on."""
    async with late_end_server(DRAIN_S * 5) as server:
        client = LeanClient(connect_timeout_s=5)
        for _ in range(2):
            async with client.stream("POST", server.url, content=b"{}") as response:
                async for _piece in response.aiter_bytes():
                    break
        assert client.connections_made == 2
        await client.aclose()


async def test_a_cancel_during_the_drain_closes_the_connection() -> None:
    async with late_end_server(DRAIN_S * 5) as server:
        client = LeanClient(connect_timeout_s=5)
        with trio.CancelScope() as scope:
            async with client.stream("POST", server.url, content=b"{}") as response:
                conn = response._conn
                assert conn is not None
                async for _piece in response.aiter_bytes():
                    break
                # The deadline from here, not from the connect: a loaded machine's connect must not use it up.
                scope.deadline = trio.current_time() + DRAIN_S / 5
        assert scope.cancelled_caught
        assert conn.sock.fileno() == -1 and not any(client._idle.values())
        await client.aclose()


async def test_limits_and_malformed_answers() -> None:
    client = LeanClient(connect_timeout_s=5)
    with pytest.raises(httpx.LocalProtocolError):
        await client.post("http://127.0.0.1:9/", content=b"", headers={"x-a": "b\r\nx-injected: 1"})
    for reply in (b"HTTP/1.1 200 OK\r\nx: " + b"a" * (MAX_HEAD_BYTES + 10) + b"\r\n\r\n",
                  b"HTTP/2 200\r\n\r\n",
                  b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
                  b"HTTP/1.1 200 OK\r\ncontent-length: 1, 2\r\n\r\n"):
        async with raw_server(reply, close_after=True) as server:
            with pytest.raises(httpx.RemoteProtocolError):
                await client.post(server.url, content=b"")
    with pytest.raises(httpx.ConnectError):
        await client.post("http://127.0.0.1:9/", content=b"")  # nothing listens on the discard port


def test_chunked_body_at_every_split() -> None:
    wire = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nx-trailer: 1\r\n\r\n"
    for split in range(len(wire) + 1):
        decoder = ChunkedBody()
        out = decoder.feed(wire[:split]) + decoder.feed(wire[split:])
        assert out == b"Wikipedia in\r\n\r\nchunks." and decoder.done and not decoder.extra
    bytewise = ChunkedBody()
    assert b"".join(bytewise.feed(wire[i:i + 1]) for i in range(len(wire))) == b"Wikipedia in\r\n\r\nchunks."
    with pytest.raises(httpx.RemoteProtocolError):
        ChunkedBody().feed(b"4\r\nabcdXX")  # no CRLF after the chunk
    with pytest.raises(httpx.RemoteProtocolError):
        ChunkedBody().feed(b"f" * 5000)  # a size line without end


@settings(max_examples=1000, deadline=None)
@given(payloads=st.lists(st.binary(min_size=1, max_size=40), max_size=8),
       extensions=st.lists(st.sampled_from([b"", b";ext=1", b" ", b"\t;a"]), min_size=9, max_size=9),
       trailers=st.lists(st.sampled_from([b"x-t: 1", b"x-u: \r"]), max_size=2),
       cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=6), hex_case=st.booleans())
def test_chunked_body_cut_anywhere(payloads: list[bytes], extensions: list[bytes], trailers: list[bytes],
                                   cuts: list[int], hex_case: bool) -> None:
    """Whole chunks in one read (taken in one pass) or cut anywhere: the same payload, the end found once."""
    sizes = [(f"{len(p):X}" if hex_case else f"{len(p):x}").encode() for p in payloads]
    wire = b"".join(size + ext + b"\r\n" + p + b"\r\n" for size, ext, p in zip(sizes, extensions, payloads,
                                                                                 strict=False))
    wire += b"0" + extensions[-1] + b"\r\n" + b"".join(t + b"\r\n" for t in trailers) + b"\r\n"
    points = sorted({c % (len(wire) + 1) for c in cuts})
    decoder = ChunkedBody()
    out = b"".join(decoder.feed(wire[a:b]) for a, b in zip([0, *points], [*points, len(wire)], strict=True))
    assert out == b"".join(payloads) and decoder.done and not decoder.extra


def test_which_client_a_tier_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert lean_applies("http://127.0.0.1:11434")
    assert not lean_applies("https://api.anthropic.com")
    assert isinstance(open_client("http://127.0.0.1:8000/v1", connect_timeout_s=1, concurrency=4), LeanClient)
    assert isinstance(open_client("http://127.0.0.1:8000/v1", connect_timeout_s=1, concurrency=4, choice="httpx"),
                      httpx.AsyncClient)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert not lean_applies("http://10.0.0.5:8000")  # the proxy applies: httpx goes through it
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert lean_applies("http://127.0.0.1:8000")


async def test_daari_through_a_write_write_upstream(tmp_path: Path) -> None:
    """The whole path (client -> daari -> http.server) with the cache on and off: the lean client serves the tier
    and the answers are the upstream's."""
    WriteWriteHandler.bodies = []
    with http_server() as url:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", url + "/v1", "m")},
                             cache={"l1": {"enabled": False}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            executor = server.parts.executors["L3"]
            for headers in ({}, {"x-daari-no-cache": "true"}):
                response = await client.post("/v1/chat/completions", headers=headers, json={
                    "model": "m", "messages": [{"role": "user", "content": "why is the sky blue?"}]})
                assert response.status_code == 200, response.text
                assert response.json()["choices"][0]["message"]["content"] == "hi"
            assert isinstance(getattr(executor, "inner", executor).http(), LeanClient)
    assert len(WriteWriteHandler.bodies) == 2 and b"why is the sky blue?" in WriteWriteHandler.bodies[0]


async def test_a_cancelled_request_is_not_sent_on_a_kept_connection() -> None:
    """The request is written with the socket's own call (no Trio checkpoint around it): a request whose scope
    was cancelled before it went out must still not reach the upstream (it would be paid for)."""
    async with raw_server(ok(b"{}")) as server:
        client = LeanClient(connect_timeout_s=5)
        assert (await client.post(server.url + "/a", content=b"{}")).content == b"{}"  # a kept connection
        with trio.CancelScope() as scope:
            scope.cancel()
            await client.post(server.url + "/b", content=b"{}")
        assert scope.cancelled_caught
        await trio.sleep(0.05)  # what was sent would have arrived by now
        assert len(server.first_reads) == 1 and server.first_reads[0].startswith(b"POST /a ")
        # The connection is not reused half-way: the next request is answered whole.
        assert (await client.post(server.url + "/c", content=b"{}")).content == b"{}"
        await client.aclose()


def _parse_head_by_bytes(head: bytes) -> tuple[str, int, str, dict[str, str]]:
    """The head's rules stated on the bytes (as the client first parsed them): the reference for `_parse_head`."""
    lines = head.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code = rest[:3]
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or not code.isdigit() or rest[3:4] not in (b"", b" "):
        raise httpx.RemoteProtocolError("status")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise httpx.RemoteProtocolError("header")
        key = name.decode("latin-1").lower()
        text = value.strip(b" \t").decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return version.decode(), int(code), rest[4:].decode("latin-1"), headers


_HEAD_BYTES = st.sampled_from([b"a", b"B", b"-", b":", b" ", b"\t", b"\r", b"\n", b"\r\n", b"\x0b", b"\x0c", b"\x1c",
                               b"\x85", b"\xa0", b"\xc0", b"\xb2", b"1", b"2", b"0"])


@settings(max_examples=3000, deadline=None)
@given(status=st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.0 404", b"HTTP/1.1 2\xb23 x", b"HTTP/2 200",
                               b"HTTP/1.1 20", b"HTTP/1.1 200x"]),
       lines=st.lists(st.lists(_HEAD_BYTES, max_size=12).map(b"".join), max_size=6))
def test_the_head_parse_keeps_the_bytes_rules(status: bytes, lines: list[bytes]) -> None:
    head = b"\r\n".join([status, *lines])
    try:
        expected: object = _parse_head_by_bytes(head)
    except (httpx.RemoteProtocolError, ValueError) as exc:
        expected = type(exc)
    try:
        got: object = _parse_head(head)
    except (httpx.RemoteProtocolError, ValueError) as exc:
        got = type(exc)
    assert got == expected


async def test_the_body_read_whole_or_in_pieces_once() -> None:
    """`aread` and `aiter_bytes` give the body once, whether it came with the head (one read) or after it; after
    `aread`, `aiter_bytes` gives the content as one piece; a body complete at its head (204) is empty whatever
    followed; the connection goes back to the pool once the body is read to its end."""
    client = LeanClient(connect_timeout_s=5)
    async with raw_server(ok(b"hello")) as server:
        async with client.stream("POST", server.url, content=b"{}") as response:
            assert await response.aread() == b"hello"
            assert await response.aread() == b"hello"
            assert [piece async for piece in response.aiter_bytes()] == [b"hello"]
        async with client.stream("POST", server.url, content=b"{}") as response:
            assert [piece async for piece in response.aiter_bytes()] == [b"hello"]
            assert [piece async for piece in response.aiter_bytes()] == []  # once, like httpx's
        assert server.connections == 1 and len(client._idle[("127.0.0.1", int(server.url.rsplit(":", 1)[1]))]) == 1
    async with raw_server(b"HTTP/1.1 204 No Content\r\n\r\nstray") as server:
        async with client.stream("POST", server.url, content=b"{}") as response:
            assert await response.aread() == b""
    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    async with raw_server(chunked) as server:
        async with client.stream("POST", server.url, content=b"{}") as response:
            assert await response.aread() == b"hello"
    await client.aclose()


def test_an_idle_connection_is_alive_only_while_quiet_and_open() -> None:
    """The liveness check is a poll, not a read: quiet and open is alive; unasked-for bytes or the peer's close
    is not (as the peek it replaced said), and nothing is consumed."""
    from daari.executors.lean_http import Connection

    for ending in ("data", "close"):
        ours, peer = socket.socketpair()
        ours.setblocking(False)
        conn = Connection(ours, trio.socket.from_stdlib_socket(ours), ("127.0.0.1", 1))
        try:
            assert conn.alive() and not conn.readable()
            if ending == "data":
                peer.sendall(b"x")
            else:
                peer.close()
            assert not conn.alive() and conn.readable()
            assert ours.recv(10) == (b"x" if ending == "data" else b"")
        finally:
            ours.close()
            peer.close()
