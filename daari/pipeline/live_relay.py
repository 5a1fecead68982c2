"""A live stream's writer: a tier's events rendered in the client's protocol and written in runs, callable from
the executor's task (a `RelayEmit`) or fed by the request's task, the same bytes either way."""

from __future__ import annotations

import time
from collections.abc import Callable

from daari.errors import DaariError
from daari.executors.base import DownstreamFailed
from daari.pipeline.steps.render import settle, start_renderer
from daari.pipeline.turn import Turn
from daari.protocol.events import Event
from daari.protocol.wire import StreamRenderer


class LiveRelay:
    """`nowait(event)` renders an event (through the privacy filter, when the tier has one) and keeps the bytes;
    `flush()` writes what was kept in one message, opening the response on the first event (the opening chunks
    go out with the first events: one write, not two). The first event also settles which tier answers
    (daari_meta) and calls `on_first` (the dropped hosted tools, a response header). `events` is every event
    rendered, for the answer's assembly, the judge, the budget and the cache.

    `prepare()` (the resilience wrapper's, once the upstream's response head is in) builds the renderer and its
    opening ahead of the first event, while the upstream works on it: only that event's own work is left between
    its read and its write.

    A failed write raises `DownstreamFailed` from the sink's error (so the executor's task does not take it for
    its own failure); `failure` keeps that error for the request's task to raise as it is."""

    __slots__ = ("_feed", "_kind", "_on_first", "_opening", "_pending", "_ready", "_render", "_started", "_tier",
                 "_turn", "events", "failure")

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
        self._ready: tuple[int, StreamRenderer, list[bytes]] | None = None  # `prepare`'s: second, renderer, opening
        # The renderer's `event`, once the stream started and when no filter feeds the events (`nowait`'s path).
        self._render: Callable[[Event], list[bytes]] | None = None
        self.events: list[Event] = []
        self.failure: BaseException | None = None

    def prepare(self) -> None:
        """The upstream accepted the request (status and headers in, no event yet): the stream's renderer and its
        opening chunks are built now, while the upstream works on its first event, not between that event's read
        and its write. Nothing is written, settled or set on the turn: a tier that fails before its first event
        still escalates, and the next tier's relay builds its own."""
        if self._started or self._ready is not None:
            return
        second = int(time.time())  # before the build: a renderer stamps its creation in whole seconds
        renderer = self._turn.wire.stream_renderer(self._turn.request)
        self._ready = (second, renderer, renderer.start())

    def _opening_chunks(self, turn: Turn) -> list[bytes]:
        """The prepared renderer's opening, if the clock is still in the second it was built in (so its bytes are
        those of a renderer built now, its id aside: the next of the same counter); else a renderer built now."""
        ready, self._ready = self._ready, None
        if ready is not None and ready[0] == int(time.time()):
            turn.renderer = ready[1]
            return ready[2]
        return start_renderer(turn)

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
                self._pending += self._opening_chunks(turn)
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
