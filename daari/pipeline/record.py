"""Routing spec step 14, record: time a request's response and publish its RoutingDecision when it ends.

`DecisionRecorder` wraps the response `Sink` (to see the status, when the response started and to add
`x-daari-request-id`) and publishes exactly one decision per request: answered, refused or abandoned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from actors.hub import Hub
from daari.errors import DaariError
from daari.ids import unique_hex
from daari.pipeline.client_family import client_of, refine_family
from daari.pipeline.decision import CLIENT_CLOSED, CLIENT_DISCONNECTED, RequestFacts, RoutingDecision, decide
from daari.pipeline.meta import Meta
from daari.pipeline.sink import Sink
from daari.pipeline.turn import Turn
from daari.protocol.chat import ChatRequest

REQUEST_ID_HEADER = "x-daari-request-id"

# log.prompts: what the decision keeps of a request's prompt (a keyed hash, the text, or nothing).
PromptDescriber = Callable[[ChatRequest], tuple[str | None, str | None]]


def new_request_id() -> str:
    return "req_" + unique_hex()  # no system call per request (daari/ids.py)


class RecordingSink:
    """A `Sink` that notes the status and the moment the response started, and adds the request id."""

    __slots__ = ("inner", "request_id", "status", "started_at", "finished", "write")

    def __init__(self, inner: Sink, request_id: str) -> None:
        self.inner = inner
        self.request_id = request_id
        self.status: int | None = None
        self.started_at: float | None = None  # perf_counter when the response (JSON or stream) began
        self.finished = False  # the whole response went out
        # A stream's writes go straight to the inner sink: nothing to note, and no frame of this sink's to suspend
        # and resume each time the server's send yields (several times a write, on Hypercorn).
        self.write: Callable[[list[bytes]], Coroutine[Any, Any, None]] = inner.write

    @property
    def stream_opened(self) -> bool:
        return self.inner.stream_opened

    async def send_json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        self.status, self.started_at = status, time.perf_counter()
        # Marked before the await: Hypercorn may report the finished request's disconnect while this send
        # yields, cancelling the request's scope after the last byte was handed over.
        self.finished = True
        await self.inner.send_json(status, body, {**headers, REQUEST_ID_HEADER: self.request_id})

    async def open_stream(self, headers: dict[str, str]) -> None:
        self.status, self.started_at = 200, time.perf_counter()
        await self.inner.open_stream({**headers, REQUEST_ID_HEADER: self.request_id})

    async def close_stream(self, chunks: Sequence[bytes] = ()) -> None:
        self.finished = True  # as in send_json
        await self.inner.close_stream(chunks)


class DecisionRecorder:
    """One per chat request, created when it arrives; publishes its decision to `hub` exactly once."""

    __slots__ = ("hub", "describe_prompt", "started", "facts", "_sink", "published")

    def __init__(self, hub: Hub[RoutingDecision], protocol: str, headers: Mapping[str, str],
                 describe_prompt: PromptDescriber | None = None) -> None:
        self.hub = hub
        self.describe_prompt = describe_prompt
        self.started = time.perf_counter()
        self.facts = RequestFacts(request_id=new_request_id(), time=time.time(), protocol=protocol,
                                  client=client_of(headers))
        self._sink: RecordingSink | None = None
        self.published = False

    def sink(self, out: Sink) -> RecordingSink:
        """The sink the pipeline must write to: it notes the status and when the response started."""
        self._sink = RecordingSink(out, self.facts.request_id)
        return self._sink

    def finished(self, turn: Turn) -> None:
        """The pipeline is done with the request, however it ended (a client that left included): call it from
        a `finally`. What the sink saw says whether the answer went out; a parsed request says what it asked."""
        if self.published:
            return
        if turn.parsed:
            request, facts = turn.request, self.facts
            if self.describe_prompt is not None:
                facts.prompt_hash, facts.prompt = self.describe_prompt(request)
            facts.model_requested, facts.stream = request.model or None, request.stream
            facts.client = refine_family(facts.client, request)  # aider's requests come through litellm
        self._publish(turn.meta, None)

    def refused(self, err: DaariError, status: int) -> None:
        """The request was refused before routing (bad body, too large, bad headers)."""
        self._publish(Meta(error=err.code or type(err).__name__, cache="none"), status)

    def abandoned(self) -> None:
        """The client left before its request body arrived."""
        self._publish(Meta(error=CLIENT_DISCONNECTED, cache="none"), CLIENT_CLOSED)

    def _publish(self, meta: Meta, status: int | None) -> None:
        if self.published:
            return
        self.published = True
        now = time.perf_counter()
        sink = self._sink
        error = None
        if status is None:
            # Routed: what the sink saw. A response that did not finish was cut short by its client.
            finished = sink is not None and sink.finished and sink.status is not None
            status = sink.status if finished and sink is not None and sink.status is not None else CLIENT_CLOSED
            error = None if finished else CLIENT_DISCONNECTED
        ttft = sink.started_at if sink is not None else None
        self.hub.publish(decide(
            self.facts, meta, status=status, latency_ms=_ms(now - self.started),
            ttft_ms=_ms(ttft - self.started) if ttft is not None else None, error=error))


def _ms(seconds: float) -> float:
    """Milliseconds to 3 decimals: round() to an integer is a third of round(x, 3)'s cost (no string)."""
    return round(seconds * 1_000_000) / 1000
