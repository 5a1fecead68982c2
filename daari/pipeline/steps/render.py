"""Routing spec step 14: the response in the client's protocol, with daari_meta; and how a failed request is
answered. Reads: the answer and everything daari_meta reports. Decides: nothing; it writes to the sink.

A JSON body whole, or a stream: opened here (or by the execute step on a live stream's first event, with
`open_stream`), then the answer's events, then the final chunk carrying daari_meta.
"""

from __future__ import annotations

from daari.errors import DaariError
from daari.pipeline.meta import Meta
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.protocol.chat import Completion
from daari.protocol.events import Event


def settle(meta: Meta, tier: str, executor: str) -> None:
    """Record which tier answers; tiers tried before it are what it escalated from."""
    meta.tier = tier
    meta.executor = executor
    tried = [a.tier for a in meta.attempts if a.outcome in ("failed", "low_confidence") and a.tier != tier]
    meta.escalated_from = tried or None


async def open_stream(turn: Turn) -> list[bytes]:
    """Start the response; returns the stream's opening chunks for the caller to write with the first events, so
    the client's first content arrives in the write that opens the stream (one send less before the first
    token: Hypercorn writes each ASGI body message with its own send)."""
    opening = start_renderer(turn)
    await turn.sink.open_stream(turn.meta.headers(turn.controls.no_cache))
    return opening


def start_renderer(turn: Turn) -> list[bytes]:
    """The stream's renderer, set on the turn; returns its opening chunks. The response is not opened here."""
    turn.renderer = turn.wire.stream_renderer(turn.request)
    return turn.renderer.start()


class RenderStep:
    name = "render"

    async def __call__(self, turn: Turn, answer: Answer) -> None:
        meta = turn.meta
        if not turn.sink.stream_opened:
            settle(meta, answer.tier, answer.executor)
        meta.confidence = answer.confidence
        meta.model = answer.completion.model or None
        await deliver(turn, answer.completion, answer.events)

    async def fail(self, turn: Turn, err: DaariError) -> None:
        meta = turn.meta
        meta.latency_ms = turn.elapsed_ms()
        if meta.error is None:
            meta.error = err.code or type(err).__name__
        sink = turn.sink
        if sink.stream_opened and turn.renderer is not None:
            await sink.close_stream(turn.renderer.error(err, meta.to_json()))
            return
        status, body = turn.wire.render_error(err)
        body["daari_meta"] = meta.to_json()
        headers = meta.headers(turn.controls.no_cache)
        if err.retry_after is not None:
            headers["retry-after"] = str(int(err.retry_after + 0.999))
        await sink.send_json(status, body, headers)


async def deliver(turn: Turn, completion: Completion, events: list[Event]) -> None:
    meta, sink = turn.meta, turn.sink
    meta.usage = completion.usage
    request = turn.request
    if not request.stream:
        meta.latency_ms = turn.elapsed_ms()
        body = turn.wire.render(completion, request, meta.to_json(), events)
        await sink.send_json(200, body, meta.headers(turn.controls.no_cache))
        return
    if not sink.stream_opened:
        opening = await open_stream(turn)
        assert turn.renderer is not None
        await sink.write(opening + [c for event in events for c in turn.renderer.event(event)])
    assert turn.renderer is not None
    meta.latency_ms = turn.elapsed_ms()
    await sink.close_stream(turn.renderer.finish(meta.to_json()))
