"""EmbedderActor: the sentence-embedding model (all-MiniLM-L6-v2), micro-batching concurrent requests.

The model loads in the background at start (a progress line); until it is ready `status.ready` is False and
L1 skips itself rather than wait. Requests queued together (up to `batch_size`) run as one batch on a worker
thread: batching is ~5x the throughput on CPU. By default a batch waits for no company (`batch_wait_s` 0):
requests that arrive while the model runs a batch queue up and form the next one, and a lone request (an agent's
turn, one at a time) starts at once instead of waiting the 2 ms it used to. `Window` asks only how much of a
text the model would read (the tokenizer, no model run): L1 needs it for the lookup context before it knows
whether the model must run at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import trio

from actors.runtime import Actor, Call, Pending, batches, handles
from daari.cpu_budget import request_work
from daari.errors import DaariError
from daari.semantic.minilm import MiniLM, Vectors, load_minilm

log = logging.getLogger("daari.l1")


class EmbedderNotReady(DaariError):
    status = 503
    code = "embedder_not_ready"


@dataclass(frozen=True)
class Embedding:
    vector: np.ndarray[Any, np.dtype[np.float32]]
    seen_chars: int  # how much of the text the model read (it stops at 256 word pieces)


@dataclass(frozen=True)
class Embed(Call[Embedding]):
    text: str


@dataclass(frozen=True)
class Window(Call[int]):
    """How many leading characters of `text` the model reads (its first 256 word pieces)."""

    text: str


INLINE_WINDOW_CHARS = 1024  # up to this the tokenizer takes ~0.1-0.4 ms, on a par with a worker thread's round trip


@dataclass
class EmbedderStatus:
    """Shared with request tasks: whether L1 can embed now (read without asking the actor)."""

    ready: bool = False
    error: str | None = None
    load_seconds: float | None = None
    batches: int = 0
    texts: int = 0
    started: trio.Event = field(default_factory=trio.Event)  # set once the load ended, either way


class EmbedderActor(Actor):
    name = "embedder"

    def __init__(self, status: EmbedderStatus, batch_size: int = 32, batch_wait_s: float = 0.0,
                 data_dir: Path | None = None) -> None:
        self.status = status
        self.data_dir = data_dir  # where the model's ONNX export is kept (daari/semantic/minilm_onnx.py)
        self.batch_size = max(1, batch_size)
        self.batch_wait_s = max(0.0, batch_wait_s)
        self.model: MiniLM | None = None
        self._thread = trio.CapacityLimiter(1)  # one batch at a time: the model uses every core it is given

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._load)
            yield
            nursery.cancel_scope.cancel()

    async def _load(self) -> None:
        started = time.monotonic()
        if not self.status.ready:
            log.info("L1: loading the embedding model all-MiniLM-L6-v2 in the background (L1 is skipped until ready)")
        try:
            self.model = await trio.to_thread.run_sync(load_minilm, self.data_dir, abandon_on_cancel=True)
        except Exception as exc:  # a missing package disables L1, never the server
            self.status.error = f"{type(exc).__name__}: {exc}"
            log.error("L1 disabled: the embedding model did not load (%s)", self.status.error)
        else:
            if not self.status.ready:
                self.status.load_seconds = round(time.monotonic() - started, 2)
                log.info("L1: embedding model ready in %.1fs", self.status.load_seconds)
            self.status.ready = True
        self.status.started.set()

    @handles(Window, concurrent=True)
    async def window(self, request: Window) -> int:
        """The tokenizer only, beside any batch the model runs (the tokenizer is safe to share between threads)."""
        model = self.model
        if model is None:
            raise EmbedderNotReady("the embedding model is still loading")
        if len(request.text) <= INLINE_WINDOW_CHARS:
            return model.seen_chars([request.text])[0]
        seen: list[int] = await trio.to_thread.run_sync(model.seen_chars, [request.text])
        return seen[0]

    @batches(Embed, max_items=lambda actor: actor.batch_size, max_wait_s=lambda actor: actor.batch_wait_s)
    async def embed(self, calls: list[Pending[Embed, Embedding]]) -> None:
        model = self.model
        if model is None:
            raise EmbedderNotReady("the embedding model is still loading")
        texts = [call.message.text for call in calls]
        with request_work():  # requests wait on this batch: a generation pauses between tokens meanwhile
            vectors, seen = await trio.to_thread.run_sync(_embed_blocking, model, texts, limiter=self._thread)
        self.status.batches += 1
        self.status.texts += len(texts)
        for i, call in enumerate(calls):
            call.answer(Embedding(vectors[i], seen[i]))


def _embed_blocking(model: MiniLM, texts: list[str]) -> tuple[Vectors, list[int]]:
    """What the model sees of each text (its first 256 word pieces) and the vectors of exactly that."""
    seen = model.seen_chars(texts)
    return model.embed([t[:n] for t, n in zip(texts, seen, strict=True)]), seen
