"""daari's own h11/wsproto front end (`server.front_end: "h11"`): HTTP/1.1 framing, keep-alive and pipelining, the
client leaving (`http.disconnect`), limits, idle time and graceful shutdown, in memory (trio-native, MockClock where
time matters) and over loopback; then a real daari on it: streaming, a client leaving mid-stream, the live tail.
The whole server-level suite also runs on it with DAARI_TEST_FRONT_END=h11 (`make test-h11`)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import h11
import httpx
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from trio_websocket import ConnectionRejected, open_websocket_url

from actors.cache import L0Count
from daari.config import ServerConfig, config_from_dict
from daari.errors import ConfigError
from daari.server.h11_front import serve
from daari.server.h11_front.connection import Connection
from daari.server.h11_front.shutdown import Shutdown
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
CHAT = {"model": "good", "messages": [{"role": "user", "content": "tell me about trio"}]}


async def answer(send: Send, body: bytes, status: int = 200) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        assert message["type"] == "http.request"
        parts.append(message["body"])
        if not message.get("more_body"):
            return b"".join(parts)


async def echo(scope: Message, receive: Receive, send: Send) -> None:
    """The path, then the body's size: enough to tell requests and their bodies apart."""
    body = await read_body(receive)
    await answer(send, f"{scope['path']} {len(body)}".encode())


class Client:
    """The client end of an in-memory connection: raw requests (pipelined if need be), answers parsed by h11."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = b""  # read, not yet parsed: the start of the next answer
        self.informational: list[int] = []  # 1xx statuses seen

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def response(self) -> tuple[h11.Response, bytes]:
        parser = h11.Connection(h11.CLIENT)  # one per answer: h11's client cannot pipeline, this test client can
        parser.send(h11.Request(method=b"GET", target=b"/", headers=[(b"host", b"t")]))
        parser.send(h11.EndOfMessage())
        if self.buffer:
            parser.receive_data(self.buffer)  # (b"" would tell h11 the server closed)
        head: h11.Response | None = None
        body = b""
        while True:
            event = parser.next_event()
            if event is h11.NEED_DATA:
                parser.receive_data(bytes(await self.stream.receive_some(65536)))
            elif isinstance(event, h11.InformationalResponse):
                self.informational.append(event.status_code)
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                self.buffer = parser.trailing_data[0]
                return head, body
            else:
                raise AssertionError(event)


@asynccontextmanager
async def connection(app: Any, **settings: Any) -> AsyncIterator[tuple[Client, list[int], Shutdown]]:
    """One connection to `app` over an in-memory stream; the list counts the server's writes."""
    server_end, client_end = trio.testing.memory_stream_pair()
    writes: list[int] = []
    pump = server_end.send_stream.send_all_hook

    async def counted() -> None:
        writes.append(len(server_end.send_stream._outgoing._data))  # what this write put on the wire
        assert pump is not None
        await pump()

    server_end.send_stream.send_all_hook = counted
    shutdown = Shutdown()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Connection(server_end, app, ServerConfig(**settings), shutdown).run)
        yield Client(client_end), writes, shutdown
        nursery.cancel_scope.cancel()


def request(path: str, body: bytes = b"", method: str = "POST", **headers: str) -> bytes:
    fields = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
    return (f"{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-length: {len(body)}\r\n{fields}\r\n").encode() + body


async def test_keep_alive_and_pipelined_requests_are_answered_in_order_on_one_connection() -> None:
    async with connection(echo) as (client, _, _):
        await client.send_raw(request("/a", b"xx") + request("/b", b"yyy"))  # pipelined: one write, two requests
        first, second = await client.response(), await client.response()
        await client.send_raw(request("/c"))  # and the connection is still there afterwards
        third = await client.response()
    assert [r[1] for r in (first, second, third)] == [b"/a 2", b"/b 3", b"/c 0"]
    assert all(r[0].status_code == 200 and r[0].reason == b"OK" for r in (first, second, third))


async def test_chunked_request_bodies_and_100_continue_reach_the_app_whole() -> None:
    async with connection(echo) as (client, _, _):
        await client.send_raw(b"POST /chunked HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await trio.testing.wait_all_tasks_blocked()
        await client.send_raw(b"6\r\n world\r\n0\r\n\r\n")  # the rest arrives later
        chunked = await client.response()
        await client.send_raw(b"POST /expect HTTP/1.1\r\nhost: t\r\ncontent-length: 4\r\nexpect: 100-continue\r\n\r\n")
        await trio.testing.wait_all_tasks_blocked()  # the app is reading the body: the server asked for it
        go_on = await client.stream.receive_some(65536)
        await client.send_raw(b"abcd")
        expected = await client.response()
    assert chunked[1] == b"/chunked 11"
    assert go_on.startswith(b"HTTP/1.1 100 ")
    assert expected[1] == b"/expect 4"


async def test_the_head_leaves_with_the_first_body_chunk_in_one_write() -> None:
    async def stream(scope: Message, receive: Receive, send: Send) -> None:
        await read_body(receive)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for piece in (b"one", b"two"):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async with connection(stream) as (client, writes, _):
        await client.send_raw(request("/s"))
        head, body = await client.response()
        streamed_writes = len(writes)
    async with connection(echo) as (client, writes, _):
        await client.send_raw(request("/whole"))
        await client.response()
        whole_writes = len(writes)
    assert head.status_code == 200 and (b"transfer-encoding", b"chunked") in head.headers and body == b"onetwo"
    assert streamed_writes == 3  # head + "one", "two", the last chunk: no write of the head alone
    assert whole_writes == 1


async def test_a_client_that_leaves_mid_stream_is_told_http_disconnect_and_the_stream_ends() -> None:
    seen: list[str] = []

    async def endless(scope: Message, receive: Receive, send: Send) -> None:
        await read_body(receive)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        async with trio.open_nursery() as nursery:
            async def watch() -> None:  # as daari's client watch does
                seen.append((await receive())["type"])
                nursery.cancel_scope.cancel()
            nursery.start_soon(watch)
            while True:
                await send({"type": "http.response.body", "body": b"tick", "more_body": True})
                await trio.sleep(1)

    async with connection(endless) as (client, _, _):
        await client.send_raw(request("/stream"))
        assert (await client.stream.receive_some(65536)).startswith(b"HTTP/1.1 200 ")
        await client.stream.aclose()  # the client goes away mid-stream
        with trio.fail_after(30):
            while not seen:
                await trio.sleep(0.5)
    assert seen == ["http.disconnect"]


async def test_a_watch_waiting_past_the_answer_gets_http_disconnect_and_the_connection_is_reused() -> None:
    watched: list[str] = []

    async def app(scope: Message, receive: Receive, send: Send, nursery: trio.Nursery) -> None:
        await read_body(receive)

        async def watch() -> None:  # lives in a nursery the server does not own, as daari's client watches do
            watched.append((await receive())["type"])
        nursery.start_soon(watch)
        await trio.testing.wait_all_tasks_blocked()  # the watch is reading the socket now
        await answer(send, scope["path"].encode())

    async with trio.open_nursery() as watches, connection(partial_app(app, watches)) as (client, _, _):
        await client.send_raw(request("/one"))
        one = await client.response()
        await client.send_raw(request("/two"))
        two = await client.response()
        with trio.fail_after(5):
            while len(watched) < 2:
                await trio.sleep(0.01)
    assert (one[1], two[1]) == (b"/one", b"/two")
    assert watched == ["http.disconnect", "http.disconnect"]


def partial_app(app: Any, nursery: trio.Nursery) -> Any:
    async def bound(scope: Message, receive: Receive, send: Send) -> None:
        await app(scope, receive, send, nursery)
    return bound


async def test_an_idle_keep_alive_connection_closes_after_the_header_timeout(autojump_clock: Any) -> None:
    async with connection(echo, header_timeout_s=30) as (client, _, _):
        await client.send_raw(request("/first"))
        await client.response()
        answered_at = trio.current_time()
        closed = await client.stream.receive_some(1)
    assert closed == b""
    assert trio.current_time() - answered_at >= 30


async def test_malformed_heads_get_400_and_oversized_heads_431_then_the_connection_closes() -> None:
    async with connection(echo) as (client, _, _):
        await client.send_raw(b"NOT A REQUEST\r\n\r\n")
        bad = await client.response()
        rest = await client.stream.receive_some(1)
    async with connection(echo, max_header_bytes=1024) as (client, _, _):
        await client.send_raw(b"GET / HTTP/1.1\r\nhost: t\r\nx-big: " + b"a" * 20_000)  # never ends its head
        big = await client.response()
    assert bad[0].status_code == 400 and b"malformed" in bad[1] and rest == b""
    assert big[0].status_code == 431 and b"server.max_header_bytes" in big[1]
    assert (b"connection", b"close") in big[0].headers


async def test_an_app_that_fails_before_answering_gets_a_500_and_one_that_answers_early_closes(
        caplog: pytest.LogCaptureFixture) -> None:
    async def broken(scope: Message, receive: Receive, send: Send) -> None:
        raise ValueError("boom")

    async def early(scope: Message, receive: Receive, send: Send) -> None:
        await answer(send, b"too large", 413)  # without reading the body

    async with connection(broken) as (client, _, _):
        await client.send_raw(request("/x?token=s3cret-token"))
        failed = await client.response()
    async with connection(early) as (client, _, _):
        await client.send_raw(request("/x", b"a" * 1000).replace(b"content-length: 1000", b"content-length: 9000"))
        refused = await client.response()  # answered while most of the body has not arrived
    assert failed[0].status_code == 500
    assert "POST /x" in caplog.text and "s3cret" not in caplog.text  # the log names the path, never the query
    assert refused[0].status_code == 413 and (b"connection", b"close") in refused[0].headers


async def test_graceful_shutdown_finishes_answers_in_flight_closes_idle_connections_and_stops_accepting() -> None:
    release = trio.Event()
    in_flight = trio.Event()

    async def app(scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await read_body(receive)
        if scope["path"] == "/slow":
            in_flight.set()
            await release.wait()
        await answer(send, scope["path"].encode())

    trigger = trio.Event()
    settings = ServerConfig(port=0, grace_period_s=30)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            urls = await nursery.start(partial(serve, app, settings, shutdown_trigger=trigger.wait))
            async with httpx.AsyncClient(base_url=urls[0]) as idle, httpx.AsyncClient(base_url=urls[0]) as busy:
                assert (await idle.get("/warm")).text == "/warm"  # a kept-alive connection, now idle
                slow: list[httpx.Response] = []

                async def ask_slow() -> None:
                    slow.append(await busy.get("/slow"))
                nursery.start_soon(ask_slow)
                await in_flight.wait()
                trigger.set()
                await trio.sleep(0.2)
                with pytest.raises(httpx.ConnectError):
                    async with httpx.AsyncClient(base_url=urls[0]) as late:
                        await late.get("/late")
                release.set()
                while not slow:  # the clients stay open until the answer in flight is read
                    await trio.sleep(0.01)
    assert slow[0].text == "/slow" and slow[0].headers["connection"] == "close"


def test_the_front_end_setting_takes_hypercorn_or_h11_only() -> None:
    assert config_from_dict({"server": {"front_end": "h11"}}).server.front_end == "h11"
    assert config_from_dict({}).server.front_end == "hypercorn"
    with pytest.raises(ConfigError):
        config_from_dict({"server": {"front_end": "nginx"}})


def h11_config(tmp_path: Path, upstream: str) -> Any:
    return make_config(tmp_path, server={"front_end": "h11"},
                       tiers={"L3": upstream_tier("openai", upstream + "/v1")})


async def test_daari_on_h11_streams_chunked_and_a_client_leaving_mid_stream_cancels_the_upstream(
        tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(h11_config(tmp_path, upstream)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        whole = await client.post("/v1/chat/completions", json={**CHAT, "stream": True})
        async with client.stream("POST", "/v1/chat/completions",
                                 json={**CHAT, "model": "hang_stream", "stream": True}) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    break  # one chunk arrived; now the client goes away
        with trio.fail_after(30):
            while not (fake.active_streams == 0 and fake.closed_streams >= 2):
                await trio.sleep(0.01)
        assert await server.parts.cache.call(L0Count()) == 1  # the finished stream only
        bad = await client.post("/v1/chat/completions", content=b"{not json",
                                headers={"content-type": "application/json"})
    assert whole.status_code == 200 and whole.headers["transfer-encoding"] == "chunked"
    assert whole.text.rstrip().endswith("data: [DONE]")
    assert response.headers["content-type"].startswith("text/event-stream")
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"


async def test_daari_on_h11_serves_the_live_tail_websocket(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(h11_config(tmp_path, upstream)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        tail_url = server.url.replace("http://", "ws://") + "/v1/daari/tail"
        async with open_websocket_url(tail_url) as tail:
            with trio.fail_after(10):
                while server.parts.tail.open != 1:
                    await trio.sleep(0.01)
            await client.post("/v1/chat/completions", json=CHAT)
            decision = json.loads(await tail.get_message())
        plain = await client.get("/v1/daari/tail")
    assert decision["tier"] == "L3" and decision["cache"] == "miss"
    assert plain.status_code == 426


async def test_websockets_echo_text_and_bytes_answer_pings_and_report_the_clients_close_code() -> None:
    ends: list[Message] = []

    async def app(scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            return  # no lifespan: the server goes on without it
        assert (await receive())["type"] == "websocket.connect"
        if scope["path"] == "/refuse":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "websocket.accept"})
        while (message := await receive())["type"] == "websocket.receive":
            await send({"type": "websocket.send", **{k: v for k, v in message.items() if k in ("text", "bytes")}})
        ends.append(message)

    trigger = trio.Event()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            urls = await nursery.start(partial(serve, app, ServerConfig(port=0), shutdown_trigger=trigger.wait))
            ws_base = urls[0].replace("http://", "ws://")
            async with open_websocket_url(ws_base + "/echo") as ws:
                await ws.send_message("hello")
                text = await ws.get_message()
                await ws.send_message(b"\x00\x01")
                data = await ws.get_message()
                await ws.ping(b"are you there")  # returns once the pong arrived
                await ws.aclose(code=4001, reason="done")
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(ws_base + "/refuse"):
                    pass
            while not ends:
                await trio.sleep(0.01)
            trigger.set()
    assert (text, data) == ("hello", b"\x00\x01")
    assert ends == [{"type": "websocket.disconnect", "code": 4001}]
    assert refused.value.status_code == 403


async def test_head_answers_carry_no_body_and_connection_close_ends_the_connection() -> None:
    async with connection(echo) as (client, _, _):
        await client.send_raw(request("/h", method="HEAD"))
        raw = b""
        while b"\r\n\r\n" not in raw:
            raw += await client.stream.receive_some(65536)
        await client.send_raw(request("/last", connection="close"))
        last = await client.response()
        after = await client.stream.receive_some(1)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"content-length: 4" in head and body == b""
    assert last[1] == b"/last 0" and after == b""


VALID_PIECES = [
    request("/a", b"hello"),
    request("/b", method="GET"),
    b"POST /c HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"GET /d HTTP/1.0\r\n\r\n",
    b"POST /e HTTP/1.1\r\nhost: t\r\ncontent-length: 10\r\n\r\nshort",  # a body cut short
    b"POST /f HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",  # broken chunk framing
    b"GET /g HTTP/1.1\r\nhost: t\r\nx-big: " + b"a" * 3000 + b"\r\n\r\n",  # over max_header_bytes 1024
]


class FailedConnections(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.records.append(record)


@given(pieces=st.lists(st.one_of(st.sampled_from(VALID_PIECES), st.binary(max_size=80)), min_size=1, max_size=5),
       cuts=st.lists(st.integers(1, 300), max_size=6), client_closes=st.booleans())
def test_any_bytes_get_well_formed_answers_or_a_close_and_never_fail_the_connection(
        pieces: list[bytes], cuts: list[int], client_closes: bool) -> None:
    failures = FailedConnections()
    logging.getLogger("daari.server.h11").addHandler(failures)
    try:
        output = trio.run(_exchange, b"".join(pieces), cuts, client_closes,
                          clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        logging.getLogger("daari.server.h11").removeHandler(failures)
    assert failures.records == []
    statuses = _statuses(output)
    assert set(statuses) <= {200, 400, 408, 431}


async def _exchange(data: bytes, cuts: list[int], client_closes: bool) -> bytes:
    """Send `data` in the pieces `cuts` makes, maybe close, and read everything until the server closes (it
    always does: on an error, on the idle timeout, or after the client closed)."""
    server_end, client_end = trio.testing.memory_stream_pair()
    output = b""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Connection(server_end, bounded_echo, ServerConfig(max_header_bytes=1024), Shutdown()).run)
        start = 0
        for cut in [*cuts, len(data)]:
            if start < len(data):
                try:
                    await client_end.send_all(data[start:start + cut])
                except trio.BrokenResourceError:
                    break
                start += cut
        if client_closes:
            await client_end.send_stream.aclose()
        while chunk := await client_end.receive_some(65536):
            output += chunk
    return output


async def bounded_echo(scope: Message, receive: Receive, send: Send) -> None:
    """`echo`, with a deadline on the body as daari's own reader has (server.body_timeout_s): 408 past it."""
    size = 0
    with trio.move_on_after(60):
        while (message := await receive())["type"] == "http.request":
            size += len(message["body"])
            if not message.get("more_body"):
                await answer(send, f"{scope['path']} {size}".encode())
                return
        return  # http.disconnect: the client left, nothing to answer
    await answer(send, b"body too slow", 408)


def _statuses(output: bytes) -> list[int]:
    """The status of every answer in `output`, which must parse as HTTP/1.1 answers (the last may be cut short
    only by the connection closing mid-body, which a server answering whole never does)."""
    statuses = []
    while output:
        parser = h11.Connection(h11.CLIENT)
        parser.send(h11.Request(method=b"GET", target=b"/", headers=[(b"host", b"t")]))
        parser.send(h11.EndOfMessage())
        parser.receive_data(output)
        parser.receive_data(b"")
        while not isinstance(event := parser.next_event(), h11.EndOfMessage):
            if isinstance(event, h11.Response):
                statuses.append(event.status_code)
        output = parser.trailing_data[0]
    return statuses
