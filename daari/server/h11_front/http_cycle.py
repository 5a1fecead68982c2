"""One request and its answer as an ASGI `http` scope over h11: `receive` reads the body from the socket as the
app asks for it, then waits for the client to leave (`http.disconnect`, which daari's client watch needs);
`send` writes the head together with the first body chunk in one socket send."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import h11
import trio

from daari.server.h11_front.link import Link, http_date
from daari.server.h11_front.shutdown import Shutdown

log = logging.getLogger("daari.server.h11")

DISCONNECT: dict[str, Any] = {"type": "http.disconnect"}
REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
# Bytes of the client's next (pipelined) requests read while waiting for it to leave: past this the wait stops
# reading and only the end of the answer ends it.
PIPELINED_BYTES = 64 * 1024


def http_scope(link: Link, request: h11.Request) -> dict[str, Any]:
    raw_path, _, query = request.target.partition(b"?")
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": request.http_version.decode("ascii"), "method": request.method.decode("ascii"),
        "scheme": "http", "path": unquote(raw_path.decode("latin-1")), "raw_path": raw_path,
        "query_string": query, "root_path": "", "headers": list(request.headers),
        "client": link.client, "server": link.server, "extensions": {},
    }


class HttpCycle:
    """The app's `receive` and `send` for one request. `receive_nowait` (a body that came with the head, without
    waiting) is what daari's body reader looks for on `receive.__self__` (server/asgi_io.py, `_arrived`)."""

    __slots__ = ("link", "is_head", "shutdown", "_body", "_body_done", "_body_over", "_head", "started",
                 "complete", "disconnected", "_leavers", "_pipelined")

    def __init__(self, link: Link, request: h11.Request, shutdown: Shutdown) -> None:
        self.link = link
        self.is_head = request.method == b"HEAD"
        self.shutdown = shutdown  # once it started, answers say `connection: close`
        self._body: list[bytes] = []  # arrived, not yet handed to the app
        self._body_done = False  # h11 saw the body's end
        self._body_over = False  # the app has been handed the body's last message
        self._head: h11.Response | None = None  # held until the first body chunk, to go out in the same send
        self.started = False
        self.complete = False
        self.disconnected = False
        self._leavers: list[trio.CancelScope] = []  # tasks waiting for the client to leave
        self._pipelined = 0
        self.take_body()

    def take_body(self) -> None:
        """Move the body h11 has parsed into `_body`, without reading the socket."""
        conn = self.link.h11
        while not self._body_done:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:  # broken chunk framing, or the client closed mid-body
                self.disconnected = True
                return
            kind = type(event)
            if kind is h11.Data:
                self._body.append(bytes(event.data))  # type: ignore[union-attr]
            elif kind is h11.EndOfMessage:
                self._body_done = True
            else:  # NEED_DATA; ConnectionClosed
                if kind is h11.ConnectionClosed:
                    self.disconnected = True
                return

    def receive_nowait(self) -> dict[str, Any]:
        if not self._body_over:
            if self._body or self._body_done:
                body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
                self._body.clear()
                self._body_over = self._body_done
                return {"type": "http.request", "body": body, "more_body": not self._body_done}
            if self.disconnected:
                return DISCONNECT
            raise trio.WouldBlock
        if self.complete or self.disconnected:
            return DISCONNECT
        raise trio.WouldBlock

    async def receive(self) -> dict[str, Any]:
        while True:
            try:
                return self.receive_nowait()
            except trio.WouldBlock:
                pass
            if self._body_over:
                await self._wait_for_leave()
            else:
                await self._read_body()

    async def _read_body(self) -> None:
        link = self.link
        async with link.read_lock:
            if self._body or self._body_done or self.disconnected:
                return  # another task read it while this one waited for the lock
            if link.h11.they_are_waiting_for_100_continue:
                await link.write(link.h11.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
            await link.receive()
            self.take_body()

    async def _wait_for_leave(self) -> None:
        """Until the client goes away (then `disconnected`) or the answer has been sent whole (`_finish` cancels
        this wait); bytes of pipelined requests that arrive meanwhile stay in h11 for the connection's next turn."""
        with trio.CancelScope() as leaving:
            self._leavers.append(leaving)
            try:
                async with self.link.read_lock:
                    while not (self.complete or self.disconnected):
                        if self._pipelined >= PIPELINED_BYTES:
                            await trio.sleep_forever()
                        data = await self.link.receive()
                        if not data:
                            self.disconnected = True
                        self._pipelined += len(data)
            finally:
                self._leavers.remove(leaving)

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.body":
            await self._send_body(message.get("body", b""), message.get("more_body", False))
        elif kind == "http.response.start":
            if self.started:
                raise RuntimeError("http.response.start sent twice")
            self.started = True
            headers = [*message.get("headers", ()), (b"date", http_date())]
            if self.shutdown.started or not self._body_done:
                # Shutting down, or answering before the whole body arrived (a 413, say): the client must not
                # send its next request on this connection, which closes after the answer.
                headers.append((b"connection", b"close"))
            status = message["status"]
            self._head = h11.Response(status_code=status, headers=headers, reason=REASONS.get(status, b""))
        else:
            raise RuntimeError(f"unexpected ASGI message on an http scope: {kind}")

    async def _send_body(self, body: bytes, more: bool) -> None:
        if not self.started:
            raise RuntimeError("http.response.body before http.response.start")
        if self.complete or self.disconnected:
            return  # as Hypercorn: a send after the client left is dropped; the app learns it from `receive`
        conn = self.link.h11
        out = b""
        if self._head is not None:
            out = conn.send(self._head) or b""
            self._head = None
        if body and not self.is_head:
            out += conn.send(h11.Data(data=body)) or b""
        if not more:
            out += conn.send(h11.EndOfMessage()) or b""
        if out and not await self.link.write(out):
            self._gone()
            return
        if not more:
            self._finish()

    def _finish(self) -> None:
        self.complete = True
        for leaving in self._leavers:
            leaving.cancel()

    def _gone(self) -> None:
        self.disconnected = True
        for leaving in self._leavers:
            leaving.cancel()

    async def after_app(self, failed: bool) -> None:
        """The app returned (or raised): answer 500 if it never started an answer; an answer it left unfinished
        leaves the connection unusable (the loop closes it, which tells the client the body is cut short)."""
        if self.started or self.disconnected:
            if not self.complete:
                self._gone()
            return
        if failed:
            log.error("the app ended without answering a request; answering 500")
        body = b"internal error in daari's front end; see the server log\n"
        await self.send({"type": "http.response.start", "status": 500,
                         "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                     (b"content-length", str(len(body)).encode())]})
        await self.send({"type": "http.response.body", "body": body})
