"""One client connection as the front end holds it: the socket, its h11 state, and the lock that lets only one
task read the socket at a time (the request's body reader, the client watch, the next request's head)."""

from __future__ import annotations

import time
from email.utils import formatdate

import h11
import trio

RECV_BYTES = 64 * 1024


class Link:
    __slots__ = ("stream", "h11", "read_lock", "eof", "broken", "client", "server")

    def __init__(self, stream: trio.abc.HalfCloseableStream, max_incomplete_bytes: int) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_incomplete_bytes)
        self.read_lock = trio.Lock()
        self.eof = False  # the client closed its side (or reset the connection)
        self.broken = False  # a write failed: the client is gone, nothing more can reach it
        self.client = _address(stream, peer=True)
        self.server = _address(stream, peer=False)

    async def receive(self) -> bytes:
        """Read what the client sent into h11; b"" (also told to h11) once it closed or reset the connection."""
        if self.eof:
            return b""
        try:
            data = bytes(await self.stream.receive_some(RECV_BYTES))  # the same object for a socket's bytes
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self.eof = True
        self.h11.receive_data(data)
        return data

    async def write(self, data: bytes) -> bool:
        """Send `data` whole (waiting while the client's window is full: that is the flow control); False when
        the client is gone."""
        if self.broken:
            return False
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True
            return False
        return True


def _address(stream: trio.abc.Stream, *, peer: bool) -> tuple[str, int] | None:
    sock = getattr(stream, "socket", None)  # None for an in-memory stream (the trio-native tests)
    if sock is None:
        return None
    try:
        address = sock.getpeername() if peer else sock.getsockname()
    except OSError:  # the client already left
        return None
    if isinstance(address, tuple) and len(address) >= 2:
        return str(address[0]), int(address[1])
    return None


_date: tuple[int, bytes] = (0, b"")


def http_date() -> bytes:
    """The Date header's value, formatted once a second rather than on every answer."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, formatdate(now, usegmt=True).encode("ascii"))
    return _date[1]
