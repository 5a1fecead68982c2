"""One client connection's loop: read a request head with h11 (within the keep-alive idle time), hand it to the
app as an ASGI `http` scope (or a websocket session on an upgrade), and reuse the connection when HTTP allows."""

from __future__ import annotations

import logging
from typing import Any

import h11
import trio

from daari.config import ServerConfig
from daari.server.h11_front.http_cycle import HttpCycle, http_scope
from daari.server.h11_front.link import Link, http_date
from daari.server.h11_front.shutdown import Shutdown
from daari.server.h11_front.websocket import WebsocketSession, is_websocket_upgrade
from daari.server.limits import REQUEST_LINE_BYTES

log = logging.getLogger("daari.server.h11")

App = Any
# What a connection reads and throws away after an answer the app gave without reading the whole body (a 413, say),
# so the client sees that answer rather than a reset: at most this much, for at most LINGER_S.
LINGER_BYTES = 1024 * 1024
LINGER_S = 1.0


class Connection:
    def __init__(self, stream: trio.abc.HalfCloseableStream, app: App, settings: ServerConfig,
                 shutdown: Shutdown) -> None:
        self.link = Link(stream, settings.max_header_bytes + REQUEST_LINE_BYTES)
        self.app = app
        self.settings = settings
        self.shutdown = shutdown

    async def run(self) -> None:
        try:
            await self._serve()
        except Exception:
            log.exception("a connection from %s failed", self.link.client)
        finally:
            await trio.aclose_forcefully(self.link.stream)

    async def _serve(self) -> None:
        conn = self.link.h11
        while True:
            request = await self._next_request()
            if request is None:
                return
            if is_websocket_upgrade(request):
                await WebsocketSession(self.link, request, self.app).run()
                return
            cycle = HttpCycle(self.link, request, self.shutdown)
            failed = False
            try:
                await self.app(http_scope(self.link, request), cycle.receive, cycle.send)
            except Exception:
                failed = True
                # The path only: a query may carry daari's token (GET /ui?token=...), which never goes to a log.
                log.exception("unhandled error in the app on %s %s", request.method.decode("latin-1"),
                              request.target.partition(b"?")[0].decode("latin-1"))
            await cycle.after_app(failed)
            if not cycle.complete or self.link.broken or self.shutdown.started:
                return
            if conn.their_state is not h11.DONE:  # the app answered without reading the whole body
                await self._linger()
                return
            if conn.our_state is h11.MUST_CLOSE:  # `connection: close`, or HTTP/1.0
                return
            conn.start_next_cycle()

    async def _next_request(self) -> h11.Request | None:
        """The next request's head; None when the connection should close (the client left, the idle time ran
        out, daari is shutting down while it sat idle, or the head was refused with 400/431)."""
        conn, read_lock = self.link.h11, self.link.read_lock
        with trio.move_on_after(self.settings.header_timeout_s), self.shutdown.while_idle() as idle:
            if read_lock.locked():
                await read_lock.acquire()  # the previous request's client watch may still be reading
            else:
                # Taken without `async with`'s checkpoint: that is a pass of Trio's run loop per request for nothing
                # (the answer's write just yielded; the read below waits, or yields once it has read).
                read_lock.acquire_nowait()
            try:
                while True:
                    try:
                        event = conn.next_event()
                    except h11.RemoteProtocolError as exc:
                        await self._refuse(exc)
                        return None
                    if event is h11.NEED_DATA:
                        if not await self.link.receive():
                            continue  # h11 says ConnectionClosed, or a RemoteProtocolError for a cut-off head
                        self.shutdown.busy(idle)  # a head has begun: shutdown lets it finish (the timeout still runs)
                    elif type(event) is h11.Request:
                        return event
                    else:  # ConnectionClosed; PAUSED cannot happen before a request
                        return None
            finally:
                read_lock.release()
        return None

    async def _refuse(self, exc: h11.RemoteProtocolError) -> None:
        """A head h11 could not take: 431 when it is too large, 400 when it is malformed, then close."""
        status = exc.error_status_hint
        if status == 431:
            text = (f"the request head is over {self.settings.max_header_bytes} bytes of header fields "
                    "(server.max_header_bytes)\n")
        else:
            text = "malformed HTTP/1.1 request head\n"  # h11's reason quotes the bytes: they may hold a secret
        body = text.encode()
        conn = self.link.h11
        try:
            data = (conn.send(h11.Response(status_code=status, headers=[
                (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"), (b"date", http_date())])) or b"")
            data += (conn.send(h11.Data(data=body)) or b"") + (conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:  # too late in the exchange for an answer
            return
        await self.link.write(data)

    async def _linger(self) -> None:
        """Before closing, read (and drop) what the client is still sending, so the kernel does not answer it with
        a reset that could destroy the answer it has not read yet."""
        if self.link.eof:
            return
        with trio.move_on_after(LINGER_S):
            try:
                await self.link.stream.send_eof()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            drained = 0
            while drained < LINGER_BYTES:
                try:
                    data = await self.link.stream.receive_some(64 * 1024)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                drained += len(data)
