"""One chat request as it walks the pipeline: what arrived (bytes, headers, wire) and what the steps found.

A `Turn` is data, not behaviour: each step (daari/pipeline/steps/) reads the fields earlier steps set and sets
its own. It holds no service: what a step needs besides the turn it was given when it was built.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from daari.pipeline.controls import NO_CONTROLS, Controls
from daari.pipeline.meta import Meta
from daari.pipeline.sink import Sink
from daari.protocol.chat import ChatRequest
from daari.protocol.wire import StreamRenderer, Wire
from daari.routing.classifier import Classification
from daari.sessions.turn import SessionTurn

# A route's rewrite of the decoded body before it is parsed (the Responses route folds in stored history).
Prepare = Callable[[Any], Awaitable[Any]]
# Cancels the request when its client leaves, for the steps that wait on something outside daari.
ClientWatch = Callable[[], AbstractAsyncContextManager[None]]


def _not_watched() -> AbstractAsyncContextManager[None]:
    return nullcontext()


class NotParsed(Exception):
    """A step read `Turn.request` before the request was parsed: a pipeline built in the wrong order."""


class Turn:
    # One per request: slots, no per-instance dict (less to allocate and for the GC to walk).
    __slots__ = ("wire", "headers", "raw", "sink", "query_string", "prepare", "watch_client", "started", "meta",
                 "controls", "partition", "cache_on", "key", "_request", "classification", "renderer",
                 "request_bytes", "session", "draft")

    def __init__(self, wire: Wire, headers: Mapping[str, str], raw: bytes, sink: Sink, *, query_string: str = "",
                 prepare: Prepare | None = None, watch_client: ClientWatch = _not_watched) -> None:
        self.wire = wire
        self.headers = headers  # lower-cased names
        self.raw = raw  # the body as received
        self.sink = sink
        self.query_string = query_string
        self.prepare = prepare
        self.watch_client = watch_client
        self.started = time.perf_counter()
        self.meta = Meta()
        # Set by the steps, in pipeline order:
        self.controls: Controls = NO_CONTROLS  # headers: X-Daari-Tier-Override, X-Daari-No-Cache
        self.partition = ""  # headers: the caller's credential partition of the cache (cache/partition.py)
        self.cache_on = False  # headers: the request reads and stores L0
        self.key = ""  # L0: the request's L0 key ("" while unknown or with the cache off)
        self._request: ChatRequest | None = None  # parse (or the L0 hit lane's remembered parse)
        self.classification: Classification | None = None  # classify (refined by the Phase B classifier)
        self.renderer: StreamRenderer | None = None  # render: the stream's renderer once a stream opened
        self.request_bytes = len(raw)
        self.session: SessionTurn | None = None  # session: which session, and its provider cache before this turn
        self.draft: str | None = None  # L1 (draft_injection): a near-miss's answer shown to the model tiers

    @property
    def parsed(self) -> bool:
        return self._request is not None

    @property
    def request(self) -> ChatRequest:
        """The parsed request: every step after parsing reads it; before, reading it is a wiring bug."""
        request = self._request
        if request is None:
            raise NotParsed("a step read the request before it was parsed")
        return request

    @request.setter
    def request(self, request: ChatRequest) -> None:
        self._request = request

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1_000_000) / 1000  # 3 decimals, as record._ms
