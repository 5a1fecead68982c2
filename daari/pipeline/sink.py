"""Where the pipeline writes a response: a JSON body, or a stream of SSE bytes. The server implements it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Sink(Protocol):
    async def send_json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None: ...

    async def open_stream(self, headers: dict[str, str]) -> None: ...

    async def write(self, chunks: list[bytes]) -> None: ...

    async def close_stream(self, chunks: Sequence[bytes] = ()) -> None:
        """End the stream; `chunks` (its last events) go out with the end, in one send."""

    @property
    def stream_opened(self) -> bool: ...
