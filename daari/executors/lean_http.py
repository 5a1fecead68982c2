"""A lean keep-alive HTTP/1.1 client for plain-HTTP upstreams (Ollama, vLLM, llama.cpp, LM Studio, local fakes):
Trio sockets, a small pool of idle connections per origin, each request sent in one write, responses parsed here.

Why: through httpx + httpcore a pass-through request cost ~2x the upstream hop's own CPU (the Request/Response
models, the cookie jar, httpcore's pool bookkeeping, h11's state machine per chunk), and the lowest cost needed
private overrides of httpcore (issue 23). This client speaks the subset an upstream call needs: one request,
its response streamed, the connection reused when the response said it may be. `https`, proxies and HTTP/2
stay with httpx (`upstream_http.open_client` picks): those upstreams are across a network, where the hop's CPU
is small against the network's time.

It answers with httpx's exception classes (ConnectError, ConnectTimeout, WriteError, ReadError,
RemoteProtocolError, ReadTimeout), so the executors map failures the same way whichever client they hold.

Delayed ACKs: a server that writes its head and then its body in two sends without TCP_NODELAY (Python's
http.server, many small servers) holds the body (Nagle) until the head is ACKed, and a peer in delayed-ACK mode
waits up to 40 ms to ACK it. Every read here re-arms TCP_QUICKACK, so the head is ACKed at once; requests go
out in one write with TCP_NODELAY, so the server never waits on daari's ACK either (docs/performance.md).
"""

from __future__ import annotations

import re
import select
import socket
import time
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import httpx
import trio

from daari import __version__
from daari.jsonio import dumps, loads

# Sent when the caller's headers carry no user-agent (a client's own is forwarded only to its own family of
# upstream): the upstream sees daari, as it sees python-httpx through httpx.
USER_AGENT = f"daari/{__version__}"
MAX_HEAD_BYTES = 64 * 1024  # a response's status line and headers together
MAX_CHUNK_LINE = 4096  # a chunk-size line (with extensions) or a trailer line
RECEIVE_BYTES = 256 * 1024
# A caller that stops reading at its protocol's own end (OpenAI's `data: [DONE]`, Anthropic's message_stop) leaves
# the HTTP body's last bytes unread (the terminal chunk, sent just after): up to this much, waited for up to this
# long, is read and dropped so the connection goes back to the pool. Without it every stream cost a new upstream
# connection, ~1-2 ms of the next stream's TTFT (docs/performance.md, "Where the streamed TTFT goes").
DRAIN_BYTES = 16 * 1024
DRAIN_S = 0.1
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,15})\r\n")  # a chunk-size line without extensions nor spaces
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only; elsewhere delayed ACKs stay as the OS does them
_NO_BODY_STATUS = frozenset({204, 304})
_SIZE, _DATA, _CRLF, _TRAILER = range(4)  # where a chunked body's decoder is: module constants, not attribute reads
_BYTES_SPACE = " \t\n\r\x0b\x0c"  # the ASCII whitespace `bytes.strip` removes
Origin = tuple[str, int]


class Target:
    """A URL as this client sends it: where to connect and the request line's target. Parsed once per URL."""

    __slots__ = ("origin", "path", "host_header")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise httpx.UnsupportedProtocol(f"the lean client speaks plain http only, not {parts.scheme!r}")
        port = parts.port or 80
        self.origin: Origin = (parts.hostname, port)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        self.host_header = host if port == 80 else f"{host}:{port}"


class ChunkedBody:
    """Incremental decoder of a chunked transfer coding: `feed` bytes, get the payload they complete.

    Bounded: a size or trailer line over MAX_CHUNK_LINE, a size that is not hex, or a chunk not followed by CRLF
    raises `RemoteProtocolError`. `done` once the last chunk and the trailers are read; `extra` says bytes
    followed them (the connection is then not reused)."""

    __slots__ = ("_buffer", "_left", "_state", "done", "extra")

    def __init__(self) -> None:
        self._buffer = b""
        self._left = 0
        self._state = _SIZE
        self.done = False
        self.extra = False

    def feed(self, data: bytes) -> bytes:
        buffer = self._buffer + data if self._buffer else data
        size, pos, state, left = len(buffer), 0, self._state, self._left
        out: list[bytes] = []
        while pos < size:
            if state == _SIZE:
                line_end = _SIZE_LINE.match(buffer, pos)  # the usual size line: hex digits and CRLF, in C
                if line_end is not None:
                    pos, left = line_end.end(), int(line_end[1], 16)
                else:
                    end = buffer.find(b"\r\n", pos, pos + MAX_CHUNK_LINE + 2)
                    if end < 0:
                        if size - pos > MAX_CHUNK_LINE:
                            raise httpx.RemoteProtocolError("a chunk-size line of the upstream is too long")
                        break
                    digits, pos = buffer[pos:end].split(b";", 1)[0].strip(), end + 2
                    if not _HEX.fullmatch(digits):
                        raise httpx.RemoteProtocolError("the upstream sent a chunk size that is not hexadecimal")
                    left = int(digits, 16)
                if not left:
                    state = _TRAILER
                elif pos + left + 2 <= size:
                    # The whole chunk and its CRLF are here (a relayed stream's reads hold whole chunks, one an
                    # event): taken in this pass, not in a data pass and a CRLF pass of their own.
                    end = pos + left
                    if buffer[end:end + 2] != b"\r\n":
                        raise httpx.RemoteProtocolError("a chunk of the upstream's body did not end with CRLF")
                    out.append(buffer[pos:end])
                    pos, left = end + 2, 0
                else:
                    state = _DATA
            elif state == _TRAILER:
                end = buffer.find(b"\r\n", pos, pos + MAX_CHUNK_LINE + 2)
                if end < 0:
                    if size - pos > MAX_CHUNK_LINE:
                        raise httpx.RemoteProtocolError("a trailer line of the upstream is too long")
                    break
                empty, pos = end == pos, end + 2
                if empty:
                    self.done = True
                    self.extra = pos < size
                    pos = size
                    break
            elif state == _DATA:
                take = min(left, size - pos)
                out.append(buffer[pos:pos + take])
                pos += take
                left -= take
                if not left:
                    state = _CRLF
            else:  # _CRLF
                if size - pos < 2:
                    break
                if buffer[pos:pos + 2] != b"\r\n":
                    raise httpx.RemoteProtocolError("a chunk of the upstream's body did not end with CRLF")
                pos += 2
                state = _SIZE
        self._buffer = buffer[pos:] if pos < size else b""
        self._state, self._left = state, left
        return out[0] if len(out) == 1 else b"".join(out)


class Connection:
    """One TCP connection to an origin: the stdlib socket (for the socket options and the readiness poll) and the
    Trio socket over the same descriptor (for awaiting I/O)."""

    __slots__ = ("raw", "sock", "origin", "idle_since", "_poll")

    def __init__(self, raw: socket.socket, sock: trio.socket.SocketType, origin: Origin) -> None:
        self.raw = raw
        self.sock = sock
        self.origin = origin
        self.idle_since = 0.0
        # Whether anything is there to read (data, the server's close, an error), asked without a read: a failed
        # non-blocking read costs Python an exception (~7,000 instructions here, against ~1,000 for a poll).
        self._poll = select.poll()
        self._poll.register(raw.fileno(), select.POLLIN)

    def readable(self) -> bool:
        """Data, the server's close or an error is waiting (a read now would not block)."""
        return bool(self._poll.poll(0))

    def alive(self) -> bool:
        """Whether an idle connection can take a request: not closed by its server, nothing unread on it."""
        return not self.readable()  # readable: closed (a read gives b""), unasked-for data, or an error

    def quickack(self) -> None:
        if _QUICKACK is not None:
            try:
                self.raw.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass

    # Sends and receives call the stdlib socket (non-blocking) and wait on its descriptor only when it would
    # block, where a Trio socket call goes through a checkpoint on each side and, for a receive, a failed
    # attempt first (the answer is never there a few microseconds after the request went out): two scheduler
    # passes and a syscall less per request. A cancelled request is still not sent (`checkpoint_if_cancelled`).

    async def send(self, data: bytes) -> None:
        raw, view, sent = self.raw, memoryview(data), 0
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            while sent < len(view):
                try:
                    sent += raw.send(view[sent:])
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(raw)
        except OSError as exc:
            raise httpx.WriteError(f"the upstream connection broke while sending: {exc}") from None
        self.quickack()  # the answer's first segment is ACKed at once (module docstring)

    async def receive(self, *, wait: bool = False) -> bytes:
        """The next bytes (b"" once the server closed); `wait`: wait for them first (an answer just asked for).
        A streamed body's reads (`_BodyPieces.__anext__`) run a copy of this inline: keep the two the same."""
        raw = self.raw
        try:
            if wait or not self.readable():  # nothing there yet: wait for it without a failed read first
                await trio.lowlevel.wait_readable(raw)
            else:
                await trio.lowlevel.checkpoint_if_cancelled()
            while True:
                try:
                    data = raw.recv(RECEIVE_BYTES)
                    break
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(raw)
        except OSError as exc:
            raise httpx.ReadError(f"the upstream connection broke while reading: {exc}") from None
        self.quickack()
        return data

    def close(self) -> None:
        self.sock.close()


class LeanResponse:
    """The response of one request: status and headers read, the body streamed by `aiter_bytes` or read whole
    by `aread` (then `content`, `text`, `json()`). Header names are lower-case; repeated headers are joined with
    ", " (Set-Cookie is not kept whole: no upstream call here needs cookies)."""

    __slots__ = ("status_code", "reason_phrase", "headers", "_conn", "_client", "_framing", "_left", "_chunked",
                 "_leftover", "_content", "_complete", "_reusable")

    def __init__(self, status_code: int, reason: str, headers: dict[str, str], conn: Connection, client: LeanClient,
                 framing: str, length: int, leftover: bytes, reusable: bool) -> None:
        self.status_code = status_code
        self.reason_phrase = reason
        self.headers = headers
        self._conn: Connection | None = conn
        self._client = client
        self._framing = framing  # "length", "chunked", "close" or "none"
        self._left = length
        self._chunked = ChunkedBody() if framing == "chunked" else None
        self._leftover = leftover  # body bytes that came with the head
        self._content: bytes | None = None
        self._complete = framing == "none" or (framing == "length" and length == 0)
        self._reusable = reusable

    @property
    def content(self) -> bytes:
        if self._content is None:
            raise httpx.ResponseNotRead()
        return self._content

    @property
    def text(self) -> str:
        return self.content.decode(_charset(self.headers.get("content-type", "")), errors="replace")

    def json(self, **kwargs: Any) -> Any:
        return loads(self.content)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise httpx.HTTPError(f"the upstream answered HTTP {self.status_code}")

    async def aread(self) -> bytes:
        """The whole body (chunked coding removed), read here without an iterator: a small answer usually came
        with its head, and an async generator costs Trio's first-iteration hook and a finalizer per response."""
        if self._content is None:
            pieces: list[bytes] = []
            piece = self._first()
            if piece:
                pieces.append(piece)
            while not self._complete:
                piece = await self._next_read()
                if piece:
                    pieces.append(piece)
            self._release()
            self._content = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return self._content

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (chunked coding removed); once, like httpx's."""
        return _BodyPieces(self)

    def _first(self) -> bytes:
        """The body bytes that came with the head (taken once); the connection released when that was all. A body
        complete before them (no body, or a zero length) has none: what followed its head is not its."""
        if self._complete:
            self._release()
            return b""
        leftover, self._leftover = self._leftover, b""
        piece = self._take(leftover) if leftover else b""
        if self._complete:
            self._release()
        return piece

    async def _next_read(self) -> bytes:
        """The payload of the next read from the connection (maybe b"": framing only); marks the end."""
        conn = self._conn
        assert conn is not None
        return self._payload(await conn.receive())

    def _payload(self, data: bytes) -> bytes:
        """The body bytes of one read (b"" once the server closed: the end of a close-framed body, else an error)."""
        if not data:
            if self._framing != "close":
                raise httpx.RemoteProtocolError("the upstream closed the connection before the body ended")
            self._complete, self._reusable = True, False
            return b""
        return self._take(data)

    async def aiter_lines(self) -> AsyncIterator[str]:
        """The body as text lines (LF or CRLF), for NDJSON upstreams."""
        pending = ""
        async for piece in self.aiter_bytes():
            pending += piece.decode("utf-8", errors="replace")
            *lines, pending = pending.split("\n")
            for line in lines:
                yield line.removesuffix("\r")
        if pending:
            yield pending

    def _take(self, data: bytes) -> bytes:
        """The payload in `data`, given the framing; marks the body complete at its end."""
        chunked = self._chunked
        if chunked is not None:
            piece = chunked.feed(data)
            if chunked.done:
                self._complete = True
                self._reusable = self._reusable and not chunked.extra
            return piece
        if self._framing == "length":
            if len(data) >= self._left:
                if len(data) > self._left:
                    self._reusable = False  # more than the declared length: the connection's framing is lost
                    data = data[:self._left]
                self._left = 0
                self._complete = True
                return data
            self._left -= len(data)
        return data

    async def drain(self) -> None:
        """Read and drop what is left of the body when it is short and comes soon (`DRAIN_BYTES`, `DRAIN_S`),
        so the connection can be pooled; otherwise leave it incomplete (then `_release` closes it)."""
        conn = self._conn
        if conn is None or self._complete or self._content is not None:
            return
        dropped = len(self._take(self._leftover)) if self._leftover else 0
        self._leftover = b""
        with trio.move_on_after(DRAIN_S):
            while not self._complete and dropped <= DRAIN_BYTES:
                data = await conn.receive()
                if not data:
                    if self._framing == "close":
                        self._complete, self._reusable = True, False
                    return
                dropped += len(self._take(data))

    def _release(self) -> None:
        """The connection back to the pool when the body was read to its end and reuse is allowed, else closed."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._complete and self._reusable:
            self._client._idle_put(conn)
        else:
            conn.close()


class _BodyPieces:
    """`LeanResponse.aiter_bytes`: the body's non-empty pieces, the connection released after the last. A class,
    not an async generator: no Trio first-iteration hook nor finalizer per response (a relayed stream's)."""

    __slots__ = ("_response", "_started", "_whole")

    def __init__(self, response: LeanResponse) -> None:
        self._response = response
        self._started = False
        self._whole = response._content  # read already (`aread`): given as one piece

    def __aiter__(self) -> _BodyPieces:
        return self

    async def __anext__(self) -> bytes:
        response = self._response
        if not self._started:
            self._started = True
            if self._whole is not None:
                if self._whole:
                    return self._whole
                raise StopAsyncIteration
            piece = response._first()
            if piece:
                return piece
        elif self._whole is not None:
            raise StopAsyncIteration
        while not response._complete:
            # `Connection.receive` inline (the same waits, errors and re-armed QUICKACK): each frame between the
            # generation's task and the socket is resumed at every wait on it (each read of a relayed stream), and a
            # coroutine called per read is built and torn down per read; `_payload` is called after the wait, so it
            # adds no such frame.
            conn = response._conn
            assert conn is not None
            raw = conn.raw
            try:
                if conn._poll.poll(0):  # something is there already: a checkpoint, not a wait (`receive`)
                    await trio.lowlevel.checkpoint_if_cancelled()
                else:
                    await trio.lowlevel.wait_readable(raw)
                while True:
                    try:
                        data = raw.recv(RECEIVE_BYTES)
                        break
                    except BlockingIOError:
                        await trio.lowlevel.wait_readable(raw)
            except OSError as exc:
                raise httpx.ReadError(f"the upstream connection broke while reading: {exc}") from None
            if _QUICKACK is not None:  # `Connection.quickack`
                try:
                    raw.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
                except OSError:
                    pass
            piece = response._payload(data)
            if piece:
                return piece
        response._release()
        raise StopAsyncIteration


class _Exchange:
    """`async with client.stream(...) as response`: the request sent on entry; leaving before the body was read
    to its end closes the connection instead of pooling it, except when it is left without an error and the rest
    of the body is short and already on its way (`LeanResponse.drain`)."""

    __slots__ = ("_client", "_args", "_response")

    def __init__(self, client: LeanClient, args: tuple[str, Any, bytes | None, Mapping[str, str] | None]) -> None:
        self._client = client
        self._args = args
        self._response: LeanResponse | None = None

    async def __aenter__(self) -> LeanResponse:
        self._response = await self._client.send(*self._args)
        return self._response

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._response is not None:
            try:
                if exc is None:
                    await self._response.drain()
            finally:  # a cancel during the drain still closes the connection
                self._response._release()


class LeanClient:
    """Connections to any number of origins; per origin, up to `max_idle` idle ones kept for `idle_expiry_s`.

    The pool does not cap connections in use: the ExecutorActor caps each tier's concurrent generations. An idle
    connection is checked before reuse with one poll (a server may have closed it), newest first (the
    one most likely still open); one that fails while sending is replaced once by a new connection, since the
    request never reached the server."""

    def __init__(self, *, connect_timeout_s: float, max_idle: int = 32, idle_expiry_s: float = 5.0) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.max_idle = max_idle
        self.idle_expiry_s = idle_expiry_s
        self._idle: dict[Origin, list[Connection]] = {}
        self._targets: dict[str, Target] = {}
        self._last: tuple[str | httpx.URL, Target] | None = None
        self.connections_made = 0  # for tests and /healthz-style introspection

    def stream(self, method: str, url: str | httpx.URL, *, content: bytes | None = None, json: Any = None,
               headers: Mapping[str, str] | None = None, timeout: Any = None) -> _Exchange:
        if json is not None:
            content = dumps(json)
        return _Exchange(self, (method, url, content, _with_json_type(headers, json is not None)))

    async def post(self, url: str | httpx.URL, *, content: bytes | None = None, json: Any = None,
                   headers: Mapping[str, str] | None = None, timeout: Any = None) -> LeanResponse:  # noqa: ASYNC109
        return await self._whole("POST", url, content, json, headers, timeout)

    async def get(self, url: str | httpx.URL, *, headers: Mapping[str, str] | None = None,
                  timeout: Any = None) -> LeanResponse:  # noqa: ASYNC109
        return await self._whole("GET", url, None, None, headers, timeout)

    async def _whole(self, method: str, url: str | httpx.URL, content: bytes | None, json: Any,
                     headers: Mapping[str, str] | None, within: Any) -> LeanResponse:
        limit = _seconds(within)
        with trio.move_on_after(limit if limit is not None else float("inf")) as scope:
            async with self.stream(method, url, content=content, json=json, headers=headers) as response:
                await response.aread()
                return response
        assert scope.cancelled_caught
        raise httpx.ReadTimeout(f"the upstream did not answer within {limit:g} s")

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()

    def target(self, url: str | httpx.URL) -> Target:
        last = self._last
        if last is not None and url is last[0]:  # an executor's endpoint: one `httpx.URL` (`endpoint_url`), whose
            return last[1]                       # str() is Python work on every request
        text = url if isinstance(url, str) else str(url)
        found = self._targets.get(text)
        if found is None:
            if len(self._targets) >= 256:  # an executor sends to a handful of URLs; bound it all the same
                self._targets.clear()
            found = self._targets[text] = Target(text)
        self._last = (url, found)  # held here, so the object (and its id) stays this URL's
        return found

    async def send(self, method: str, url: str | httpx.URL, content: bytes | None,
                   headers: Mapping[str, str] | None) -> LeanResponse:
        """Send the request and read the response's head; the body is left to the response."""
        target = self.target(url)
        request = _request_bytes(method, target, content, headers)
        conn = self._idle_take(target.origin)
        if conn is not None:
            try:
                await conn.send(request)
            except httpx.WriteError:
                conn.close()  # the server closed it as we wrote: the request never arrived, so a new one is safe
                conn = None
        if conn is None:
            conn = await self._connect(target.origin)
            try:
                await conn.send(request)
            except BaseException:
                conn.close()
                raise
        try:
            return await self._read_head(conn, method)
        except BaseException:
            conn.close()
            raise

    async def _connect(self, origin: Origin) -> Connection:
        host, port = origin
        with trio.move_on_after(self.connect_timeout_s):
            try:
                infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise httpx.ConnectError(f"cannot resolve the upstream's host: {exc}") from None
            error: OSError | None = None
            for family, kind, proto, _, address in infos:
                raw = socket.socket(family, kind, proto)
                raw.setblocking(False)
                sock = trio.socket.from_stdlib_socket(raw)
                try:
                    await sock.connect(address)
                except OSError as exc:
                    sock.close()
                    error = exc
                    continue
                except BaseException:
                    sock.close()
                    raise
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is one write: send it now
                self.connections_made += 1
                return Connection(raw, sock, origin)
            raise httpx.ConnectError(f"cannot connect to the upstream: {error}")
        raise httpx.ConnectTimeout(f"connecting to the upstream took over {self.connect_timeout_s:g} s")

    async def _read_head(self, conn: Connection, method: str) -> LeanResponse:
        buffer = b""
        while True:
            end = buffer.find(b"\r\n\r\n")
            while end < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise httpx.RemoteProtocolError("the upstream's response head is too large")
                data = await conn.receive(wait=not buffer)
                if not data:
                    raise httpx.RemoteProtocolError("the upstream closed the connection without a response")
                buffer += data
                end = buffer.find(b"\r\n\r\n")
            if end > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("the upstream's response head is too large")
            head, buffer = buffer[:end], buffer[end + 4:]
            version, status, reason, headers = _parse_head(head)
            if 100 <= status < 200:  # 100 Continue, 103 Early Hints: the final response follows
                continue
            break
        connection = headers.get("connection", "").lower()
        reusable = version == "HTTP/1.1" and "close" not in connection
        framing, length = "close", 0
        if method == "HEAD" or status in _NO_BODY_STATUS:
            framing = "none"
        elif "transfer-encoding" in headers:
            if headers["transfer-encoding"].lower().rsplit(",", 1)[-1].strip() == "chunked":
                framing = "chunked"
        elif "content-length" in headers:
            length = _content_length(headers["content-length"])
            framing = "length"
        if framing == "close":
            reusable = False
        return LeanResponse(status, reason, headers, conn, self, framing, length, buffer, reusable)

    def _idle_take(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        deadline = time.monotonic() - self.idle_expiry_s
        while idle:
            conn = idle.pop()  # the newest: the likeliest to be open still
            if conn.idle_since > deadline and conn.alive():
                return conn
            conn.close()
        return None

    def _idle_put(self, conn: Connection) -> None:
        idle = self._idle.setdefault(conn.origin, [])
        conn.idle_since = time.monotonic()
        idle.append(conn)
        if len(idle) > self.max_idle:
            idle.pop(0).close()  # the oldest goes


def _request_bytes(method: str, target: Target, content: bytes | None, headers: Mapping[str, str] | None) -> bytes:
    """The request's head and body as one buffer. A CR or LF inside a header (a value from a client or a config)
    would split the head: refused rather than sent."""
    lines = [f"{method} {target.path} HTTP/1.1\r\nhost: {target.host_header}\r\n"]
    agent = False
    if headers:
        for name, value in headers.items():  # one loop, no generator frames (every upstream request)
            if name != "content-length" and name != "host":
                lines.append(f"{name}: {value}\r\n")
            if not agent and name.lower() == "user-agent":
                agent = True
    if not agent:
        lines.append(f"user-agent: {USER_AGENT}\r\n")
    if content is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"content-length: {len(content) if content else 0}\r\n")
    lines.append("\r\n")
    head = "".join(lines)
    if head.count("\n") != len(lines) + 1 or head.count("\r") != len(lines) + 1:
        raise httpx.LocalProtocolError("a header name or value holds a line break")
    try:
        data = head.encode("latin-1")
    except UnicodeEncodeError:
        data = head.encode("utf-8")
    return data + content if content else data


def _parse_head(head: bytes) -> tuple[str, int, str, dict[str, str]]:
    """Status line and headers, decoded once as latin-1 (each byte one character: the checks below are the
    bytes' own, `_BYTES_SPACE` being what `bytes.strip` strips)."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if (version not in ("HTTP/1.1", "HTTP/1.0") or not code.isascii() or not code.isdigit()
            or rest[3:4] not in ("", " ")):
        raise httpx.RemoteProtocolError("the upstream's status line is not HTTP/1.x")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip(_BYTES_SPACE):  # (a line starting with space: its name)
            raise httpx.RemoteProtocolError("the upstream sent a malformed header line")
        key = name.lower()
        text = value.strip(" \t")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return version, int(code), rest[4:], headers


def _content_length(value: str) -> int:
    values = {v.strip() for v in value.split(",")}  # a repeated header joined: all the same, or refused
    if len(values) != 1 or not (only := values.pop()).isdigit():
        raise httpx.RemoteProtocolError("the upstream sent an invalid Content-Length")
    return int(only)


def _charset(content_type: str) -> str:
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return "utf-8"


def _with_json_type(headers: Mapping[str, str] | None, is_json: bool) -> Mapping[str, str] | None:
    """`json=` sets content-type as httpx does, unless the caller's headers say one."""
    if not is_json or (headers is not None and "content-type" in headers):
        return headers
    return {**(headers or {}), "content-type": "application/json"}


def _seconds(timeout: Any) -> float | None:
    """An overall limit from a float or an `httpx.Timeout` (its read limit, the longest wait here)."""
    if isinstance(timeout, httpx.Timeout):
        return timeout.read
    return float(timeout) if timeout is not None else None
