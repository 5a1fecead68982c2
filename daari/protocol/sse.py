"""Server-sent events: encode one event, and decode a byte stream incrementally (for upstream streams)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from daari.jsonio import dumps


def encode(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One SSE event. Dicts are compact JSON; a str is sent as is (OpenAI's `[DONE]`)."""
    payload = data.encode() if isinstance(data, str) else dumps(data)
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + payload + b"\n\n"


@dataclass(frozen=True)
class SSEEvent:
    event: str | None
    data: str


class SSEError(ValueError):
    """The stream broke a limit (a line or an event too long): the upstream is faulty or hostile."""


_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = "\ufeff"
MAX_LINE_BYTES = 4 * 1024 * 1024  # one line; an upstream's largest real event is far smaller
MAX_EVENT_BYTES = 16 * 1024 * 1024  # the data lines of one event together


class SSEDecoder:
    """Incremental decoder: feed bytes as they arrive, get whole events back.

    The WHATWG rules: lines end with CRLF, LF or CR (a CRLF split across two chunks is one line end);
    `event:` and `data:` fields (several data lines join with newlines), other fields (`id`, `retry`) and
    comments (`:` lines) ignored, a leading BOM dropped; a blank line dispatches the event, an event
    without data is not dispatched. Each byte is scanned once (linear time), and a line or event over
    its limit raises `SSEError` instead of growing memory without end.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.max_event_bytes = max_event_bytes
        self._partial = bytearray()  # the line so far, its end not yet seen
        self._after_cr = False  # the last chunk ended with CR: an LF opening the next one belongs to it
        self._first_line = True
        self._event: str | None = None
        self._data: list[str] = []
        self._data_bytes = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        start = 0
        if self._after_cr and chunk[:1] == b"\n":
            start = 1
        self._after_cr = False
        for end in _LINE_END.finditer(chunk, start):
            piece = chunk[start:end.start()]
            if self._partial:
                self._grow(piece)
                piece = bytes(self._partial)
                self._partial.clear()
            elif len(piece) > self.max_line_bytes:
                raise SSEError(f"an SSE line is longer than {self.max_line_bytes} bytes")
            self._line(piece, events)
            start = end.end()
        if start < len(chunk):
            self._grow(chunk[start:])
        elif chunk.endswith(b"\r"):
            self._after_cr = True
        return events

    @property
    def pending(self) -> bool:
        """True when bytes or a half-built event are left: the stream was cut mid-event."""
        return bool(bytes(self._partial).strip() or self._data)

    def _grow(self, piece: bytes) -> None:
        if len(self._partial) + len(piece) > self.max_line_bytes:
            raise SSEError(f"an SSE line is longer than {self.max_line_bytes} bytes")
        self._partial += piece

    def _line(self, raw: bytes, events: list[SSEEvent]) -> None:
        line = raw.decode("utf-8", errors="replace")
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            if self._data:
                events.append(SSEEvent(self._event, "\n".join(self._data)))
            self._event, self._data, self._data_bytes = None, [], 0
            return
        if line.startswith(":"):
            return
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            self._event = value
        elif field == "data":
            self._data_bytes += len(raw)
            if self._data_bytes > self.max_event_bytes:
                raise SSEError(f"an SSE event is larger than {self.max_event_bytes} bytes")
            self._data.append(value)
