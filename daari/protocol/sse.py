"""Server-sent events: encode one event, and decode a byte stream incrementally (for upstream streams)."""

from __future__ import annotations

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


class SSEDecoder:
    """Incremental decoder: feed bytes as they arrive, get whole events back.

    Follows the WHATWG rules daari meets in practice: `event:` and `data:` fields (several data lines
    join with newlines), comments (`:` lines) ignored, CRLF or LF line ends, events end at a blank line.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buffer += chunk
        events: list[SSEEvent] = []
        while True:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                return events
            line = self._buffer[:newline].rstrip(b"\r").decode("utf-8", errors="replace")
            self._buffer = self._buffer[newline + 1:]
            if not line:
                if self._data or self._event:
                    events.append(SSEEvent(self._event, "\n".join(self._data)))
                self._event, self._data = None, []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                self._event = value
            elif field == "data":
                self._data.append(value)

    @property
    def pending(self) -> bool:
        """True when bytes or a half-built event are left: the stream was cut mid-event."""
        return bool(self._buffer.strip() or self._data)
