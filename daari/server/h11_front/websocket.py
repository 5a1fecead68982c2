"""A websocket over wsproto as an ASGI `websocket` scope (the live tail): the handshake h11 already parsed, then
frames. The app may refuse the handshake with `websocket.close` (403) or an HTTP answer of its own
(`websocket.http.response`)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote

import h11
import trio
from wsproto import ConnectionType
from wsproto.connection import Connection as WsConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.handshake import H11Handshake
from wsproto.utilities import LocalProtocolError as WsLocalError
from wsproto.utilities import RemoteProtocolError as WsRemoteError

from daari.server.h11_front.link import RECV_BYTES, Link

log = logging.getLogger("daari.server.h11")

App = Any
MAX_MESSAGE_BYTES = 1024 * 1024  # a client message past this closes the socket with 1009 (daari's read nothing big)
CLOSE_ABNORMAL = 1006  # the client went away without a close frame
CLOSE_TOO_BIG = 1009


def is_websocket_upgrade(request: h11.Request) -> bool:
    if request.method != b"GET":
        return False
    return any(name == b"upgrade" and value.lower() == b"websocket" for name, value in request.headers)


class WebsocketSession:
    def __init__(self, link: Link, request: h11.Request, app: App) -> None:
        self.link = link
        self.request = request
        self.app = app
        self.handshake = H11Handshake(ConnectionType.SERVER)
        self.ws: WsConnection | None = None  # once accepted
        self.write_lock = trio.Lock()  # the app's sends and the reader's pong / close replies share the socket
        self.connected = False  # `websocket.connect` handed to the app
        self.answered = False  # accepted, or refused with an HTTP answer
        self.closed = False  # a close frame went out, or the client left: no more frames
        self.close_code: int | None = None
        self._text: list[str] = []
        self._bytes: list[bytes] = []
        self._size = 0

    async def run(self) -> None:
        try:
            self.handshake.initiate_upgrade_connection(list(self.request.headers), self.request.target)
            event = next(iter(self.handshake.events()), None)
        except WsRemoteError as exc:
            await self._refuse_plain(400, f"bad websocket handshake: {exc}")
            return
        if not isinstance(event, Request):
            await self._refuse_plain(400, "bad websocket handshake")
            return
        try:
            await self.app(self._scope(event), self.receive, self.send)
        except Exception:
            log.exception("unhandled error in the app's websocket on %s",  # the path only: not a token in a query
                          self.request.target.partition(b"?")[0].decode("latin-1"))
        if not self.answered:  # the app ended without a word: refuse as ASGI says (403)
            await self._write(self.handshake.send(RejectConnection(status_code=403)))
        elif self.ws is not None and not self.closed:
            await self.send({"type": "websocket.close", "code": 1000})

    def _scope(self, event: Request) -> dict[str, Any]:
        raw_path, _, query = self.request.target.partition(b"?")
        return {
            "type": "websocket", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": self.request.http_version.decode("ascii"), "scheme": "ws",
            "path": unquote(raw_path.decode("latin-1")), "raw_path": raw_path, "query_string": query,
            "root_path": "", "headers": list(self.request.headers), "client": self.link.client,
            "server": self.link.server, "subprotocols": list(event.subprotocols),
            "extensions": {"websocket.http.response": {}},
        }

    async def receive(self) -> dict[str, Any]:
        if not self.connected:
            self.connected = True
            return {"type": "websocket.connect"}
        while True:
            if self.close_code is not None:
                return {"type": "websocket.disconnect", "code": self.close_code}
            if self.ws is None:  # refused, or not yet accepted: nothing comes but the client leaving
                await self._read_raw()
                continue
            message = await self._next_message(self.ws)
            if message is not None:
                return message

    async def _read_raw(self) -> bytes:
        """The client's next bytes; b"" once it left (recorded as an abnormal close)."""
        try:
            data = bytes(await self.link.stream.receive_some(RECV_BYTES))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self._left(CLOSE_ABNORMAL)
        return data

    async def _next_message(self, ws: WsConnection) -> dict[str, Any] | None:
        for event in ws.events():
            if isinstance(event, TextMessage):
                self._text.append(event.data)
                self._size += len(event.data)
            elif isinstance(event, BytesMessage):
                self._bytes.append(bytes(event.data))
                self._size += len(event.data)
            elif isinstance(event, Ping):
                if ws.state is ConnectionState.OPEN:  # no pong once a close frame went out
                    await self._write(ws.send(event.response()))
                continue
            elif isinstance(event, CloseConnection):
                if ws.state is ConnectionState.REMOTE_CLOSING:
                    await self._write(ws.send(event.response()))
                self._left(event.code)
                return None
            else:
                continue
            if self._size > MAX_MESSAGE_BYTES:
                await self.send({"type": "websocket.close", "code": CLOSE_TOO_BIG})
                self._left(CLOSE_TOO_BIG)
                return None
            if event.message_finished:
                return self._message()
        data = await self._read_raw()
        if not data:
            return None
        try:
            ws.receive_data(data)
        except WsRemoteError:
            self._left(CLOSE_ABNORMAL)
        return None

    def _message(self) -> dict[str, Any]:
        if self._text:
            message: dict[str, Any] = {"type": "websocket.receive", "text": "".join(self._text)}
        else:
            message = {"type": "websocket.receive", "bytes": b"".join(self._bytes)}
        self._text, self._bytes, self._size = [], [], 0
        return message

    def _left(self, code: int) -> None:
        self.close_code = code
        self.closed = True

    async def send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "websocket.accept":
            self._check_unanswered(kind)
            self.answered = True
            await self._write(self.handshake.send(AcceptConnection(
                subprotocol=message.get("subprotocol"), extra_headers=list(message.get("headers", ())))))
            self.ws = self.handshake.connection
            data, _ = self.link.h11.trailing_data  # frames the client sent right behind its handshake
            if data and self.ws is not None:
                self.ws.receive_data(data)
        elif kind in ("websocket.send", "websocket.close"):
            if self.ws is None:
                if kind == "websocket.close":  # a refused handshake
                    self._check_unanswered(kind)
                    self.answered = True
                    await self._write(self.handshake.send(RejectConnection(status_code=403)))
                    self._left(message.get("code", 1000))
                    return
                raise RuntimeError("websocket.send before websocket.accept")
            await self._send_frame(self.ws, message)
        elif kind == "websocket.http.response.start":
            self._check_unanswered(kind)
            self.answered = True
            await self._write(self.handshake.send(RejectConnection(
                status_code=message["status"], headers=list(message.get("headers", ())), has_body=True)))
        elif kind == "websocket.http.response.body":
            more = message.get("more_body", False)
            await self._write(self.handshake.send(RejectData(data=message.get("body", b""), body_finished=not more)))
            if not more:
                self._left(1000)
        else:
            raise RuntimeError(f"unexpected ASGI message on a websocket scope: {kind}")

    async def _send_frame(self, ws: WsConnection, message: dict[str, Any]) -> None:
        if self.closed or ws.state is not ConnectionState.OPEN:
            return  # the client left: the app learns it from `receive`
        try:
            if message["type"] == "websocket.close":
                self.closed = True
                data = ws.send(CloseConnection(code=message.get("code", 1000), reason=message.get("reason") or None))
            elif message.get("text") is not None:
                data = ws.send(TextMessage(data=message["text"]))
            else:
                data = ws.send(BytesMessage(data=message.get("bytes") or b""))
        except WsLocalError:
            return
        await self._write(data)

    def _check_unanswered(self, kind: str) -> None:
        if self.answered:
            raise RuntimeError(f"{kind} after the handshake was already answered")

    async def _write(self, data: bytes) -> None:
        async with self.write_lock:
            if not await self.link.write(data):
                self._left(CLOSE_ABNORMAL)

    async def _refuse_plain(self, status: int, text: str) -> None:
        body = (text + "\n").encode()
        conn = self.link.h11
        try:
            data = (conn.send(h11.Response(status_code=status, headers=[
                (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                (b"connection", b"close")])) or b"") + (conn.send(h11.Data(data=body)) or b"")
            data += conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            return
        await self.link.write(data)
