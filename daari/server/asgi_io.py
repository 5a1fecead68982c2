"""ASGI I/O kept apart from routing: read a bounded (and maybe compressed) body, send JSON, stream SSE, notice a
disconnect."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any

import trio

from daari.errors import PayloadTooLarge, RequestTimeout
from daari.jsonio import dumps
from daari.server.content_coding import BodyDecoder, body_decoder
from daari.server.limits import RequestLimits

Scope = dict[str, Any]
Receive = Any
Send = Any


class ClientDisconnected(Exception):
    """The client left before its request body arrived: nothing to answer."""


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers, lower-cased names; a repeated header keeps its last value."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


async def read_body(receive: Receive, headers: dict[str, str], limits: RequestLimits) -> bytes:
    """The request body, decompressed when it came with a Content-Encoding; every limit is checked as it arrives,
    so nothing past `max_body_bytes` is ever held. 408 when it has not all arrived within `body_timeout_s`."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise PayloadTooLarge(f"request body is {declared} bytes; the limit is {limits.max_body_bytes} "
                              "(server.max_body_bytes)")
    decoder = body_decoder(headers.get("content-encoding"), limits.max_body_bytes, limits.max_expansion_ratio)
    first = _arrived(receive)
    if first is not None and decoder is None and (not first.get("more_body", False) or _holds(first, declared)):
        return _whole_body(first, limits.max_body_bytes)
    with trio.move_on_after(limits.body_timeout_s):
        return await _receive_body(receive, limits.max_body_bytes, decoder, first)
    raise RequestTimeout(f"the request body did not arrive whole within {limits.body_timeout_s:g}s "
                         "(server.body_timeout_s)")


def _arrived(receive: Receive) -> dict[str, Any] | None:
    """The first body message if it has already arrived, taken without waiting. Hypercorn's `receive` is a Trio
    memory channel's: a small body is usually there when the app is called, and a body that is there needs no
    deadline, whose cancel scope would cost a hit a tenth of its CPU. Any other `receive` gets None."""
    take = getattr(getattr(receive, "__self__", None), "receive_nowait", None)
    if take is None:
        return None
    try:
        message: dict[str, Any] = take()
    except trio.WouldBlock:
        return None
    return message


def _holds(message: dict[str, Any], declared: str | None) -> bool:
    """Whether `message` already holds the whole body the client declared. Hypercorn sends a body as a message
    with `more_body` set and then an empty one that ends it, often a scheduling round later: waiting for that
    end would put nearly every request on the deadline path. The parser does not let a body grow past its
    Content-Length, so the end message carries nothing; it is left unread (the client watch skips it)."""
    return (declared is not None and declared.isdigit() and message["type"] == "http.request"
            and len(message.get("body", b"")) == int(declared))


def _whole_body(message: dict[str, Any], limit: int) -> bytes:
    if message["type"] == "http.disconnect":
        raise ClientDisconnected
    body: bytes = message.get("body", b"")
    if len(body) > limit:
        raise PayloadTooLarge(f"request body is over {limit} bytes (server.max_body_bytes)")
    return body


async def _receive_body(receive: Receive, limit: int, decoder: BodyDecoder | None,
                        first: dict[str, Any] | None = None) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        if first is not None:
            message, first = first, None
        else:
            message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is over {limit} bytes (server.max_body_bytes)")
        if decoder is None:
            parts.append(chunk)
        else:
            for piece in decoder.feed(chunk):
                parts.append(piece)
                await trio.lowlevel.checkpoint()  # a slice at a time: other requests run between slices
        if not message.get("more_body", False):
            if decoder is not None:
                decoder.finish()
            return b"".join(parts)


def _raw_headers(headers: dict[str, str], content_type: str) -> list[tuple[bytes, bytes]]:
    raw = [(b"content-type", content_type.encode())]
    for name, value in headers.items():  # a loop, not a generator: no frame resumed per header
        raw.append((name.encode("latin-1"), value.encode("latin-1")))
    return raw


async def send_json(send: Send, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    payload = dumps(body)
    raw = _raw_headers(headers or {}, "application/json")
    # A declared length: the server sends the body as is instead of chunk-framing it (less work for both
    # ends, and a client can size its buffer).
    raw.append((b"content-length", str(len(payload)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload, "more_body": False})


async def send_text(send: Send, status: int, text: str, content_type: str = "text/plain; charset=utf-8") -> None:
    await send({"type": "http.response.start", "status": status, "headers": _raw_headers({}, content_type)})
    await send({"type": "http.response.body", "body": text.encode(), "more_body": False})


async def answer_lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge Hypercorn's lifespan startup and shutdown: an app that ignores them fails to start."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def read_all(receive: Receive) -> bytes:
    """A request body, unbounded: for trusted peers only (test fakes); clients go through `read_body`."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def watch_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    """Hypercorn does not raise in the app when a client leaves: wait for http.disconnect and cancel."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def _nothing() -> None:
    """An empty write's awaitable (`AsgiSink.write`)."""


class AsgiSink:
    """The pipeline's `Sink` over ASGI `send`.

    With `hold_json`, a whole JSON response is held (its two ASGI messages built) and its owner sends them once the
    pipeline has returned (`take_held`). Why: Hypercorn's `send` yields to Trio's scheduler about
    nine times per response (its send lock, each socket write, the stream's close), and every yield suspends and
    resumes every coroutine frame between the app's task and that `send`: ~10 of daari's (route, pipeline, step,
    render, recorder, sink) against the bare app's one. Sent from the route, an L0 hit's response crosses two
    (docs/performance.md, "The L0 hit on Hypercorn, fourth stop"). Nothing the pipeline or the decision records
    changes: the response is complete when held, and the recorder notes its status and start at that moment, as
    it did when the send was awaited there. Streams are never held."""

    __slots__ = ("_send", "_stream_opened", "finished", "_hold_json", "_held")

    def __init__(self, send: Send, *, hold_json: bool = False) -> None:
        self._send = send
        self._stream_opened = False
        self.finished = False
        self._hold_json = hold_json
        self._held: tuple[dict[str, Any], dict[str, Any]] | None = None

    @property
    def stream_opened(self) -> bool:
        return self._stream_opened

    async def send_json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        if not self._hold_json:
            await send_json(self._send, status, body, headers)
            self.finished = True
            return
        if self._held is None:  # a second response is dropped, as the server drops one after a response ended
            payload = dumps(body)
            raw = _raw_headers(headers, "application/json")
            raw.append((b"content-length", str(len(payload)).encode()))
            self._held = ({"type": "http.response.start", "status": status, "headers": raw},
                          {"type": "http.response.body", "body": payload, "more_body": False})
        self.finished = True

    def take_held(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The held JSON response's two messages, if any (`hold_json`), for the owner to send once the pipeline
        is done; taken once."""
        held, self._held = self._held, None
        return held

    async def open_stream(self, headers: dict[str, str]) -> None:
        raw = _raw_headers({**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
                           "text/event-stream; charset=utf-8")
        await self._send({"type": "http.response.start", "status": 200, "headers": raw})
        self._stream_opened = True

    def write(self, chunks: list[bytes]) -> Coroutine[Any, Any, None]:
        """The server's `send` of the chunks, for the caller to await: no coroutine of this sink's per write, nor a
        frame of it resumed each time the server's send yields (twice a write on Hypercorn)."""
        if chunks:
            send: Coroutine[Any, Any, None] = self._send(
                {"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
            return send
        return _nothing()

    async def close_stream(self, chunks: Sequence[bytes] = ()) -> None:
        # The last events and the end in one message: one send (and its yields) less per stream.
        await self._send({"type": "http.response.body", "body": b"".join(chunks), "more_body": False})
        self.finished = True
