"""A live stream's writer: a tier's events rendered in the client's protocol and written in runs, callable from
the executor's task (a `RelayEmit`) or fed by the request's task, the same bytes either way."""

from __future__ import annotations

from collections.abc import Callable

from daari.errors import DaariError
from daari.executors.base import DownstreamFailed
from daari.pipeline.steps.render import settle, start_renderer
from daari.pipeline.turn import Turn
from daari.protocol.events import Event


class LiveRelay:
    """`nowait(event)` renders an event (through the privacy filter, when the tier has one) and keeps the bytes;
    `flush()` writes what was kept in one message, opening the response on the first event (the opening chunks
    go out with the first events: one write, not two). The first event also settles which tier answers
    (daari_meta) and calls `on_first` (the dropped hosted tools, a response header). `events` is every event
    rendered, for the answer's assembly, the judge, the budget and the cache.

    A failed write raises `DownstreamFailed` from the sink's error (so the executor's task does not take it for
    its own failure); `failure` keeps that error for the request's task to raise as it is."""

    __slots__ = ("_feed", "_kind", "_on_first", "_opening", "_pending", "_render", "_started", "_tier", "_turn",
                 "events", "failure")

    def __init__(self, turn: Turn, tier: str, kind: str, feed: Callable[[Event], list[Event]] | None,
                 on_first: Callable[[], None]) -> None:
        self._turn = turn
        self._tier = tier
        self._kind = kind
        self._feed = feed
        self._on_first = on_first
        self._started = turn.sink.stream_opened
        self._opening = False  # the response's start is still to be sent (with the next write)
        self._pending: list[bytes] = []
        # The renderer's `event`, once the stream started and when no filter feeds the events (`nowait`'s path).
        self._render: Callable[[Event], list[bytes]] | None = None
        self.events: list[Event] = []
        self.failure: BaseException | None = None

    def nowait(self, received: Event) -> bool:
        render = self._render
        if render is not None:  # started, no filter: one event in, one rendered (no loop, no tuple, no look-ups)
            self.events.append(received)
            self._pending += render(received)
            return True
        turn = self._turn
        for event in self._feed(received) if self._feed is not None else (received,):
            if not self._started:
                self._started = self._opening = True
                settle(turn.meta, self._tier, self._kind)
                self._on_first()
                self._pending += start_renderer(turn)
            self.events.append(event)
            assert turn.renderer is not None
            self._pending += turn.renderer.event(event)
        if self._feed is None and self._started and turn.renderer is not None:
            self._render = turn.renderer.event  # the renderer is the turn's from its first event on
        return True

    async def __call__(self, event: Event) -> None:
        self.nowait(event)
        await self.flush()

    async def flush(self) -> None:
        if not (self._pending or self._opening):
            return
        chunks, self._pending = self._pending, []
        sink = self._turn.sink
        try:
            if self._opening:
                self._opening = False
                await sink.open_stream(self._turn.meta.headers(self._turn.controls.no_cache))
            await sink.write(chunks)
        except DaariError:
            raise
        except Exception as exc:
            self.failure = exc
            raise DownstreamFailed(f"writing to the client failed: {type(exc).__name__}") from exc
