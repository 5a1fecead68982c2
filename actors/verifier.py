"""VerifierActor: the second check an L1 candidate must pass (`cache.l1.verify`: none | lexical | pair_model | model).

`lexical` answers at once (pure rules, microseconds). `pair_model` loads its trees in the background at
start (like the embedder's model; milliseconds) and then answers at once too: hard vetoes, then the learned
pair classifier over the pair's features and the candidate's cosine (`Verify.similarity`). Until the trees
are loaded, or if they fail to load, or when a caller sends no similarity, it answers with the lexical rules
(the previous default, never less strict). `model` runs the lexical rules first, then asks a local model
through `ask_model`, one question at a time; a model that fails, is busy past `model_wait_s`, or answers
anything but YES/NO rejects the candidate.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import trio

from actors.runtime import Actor, Call, handles
from daari.protocol.chat import Message
from daari.semantic.lexical import SAME, Verdict, lexical_verdict
from daari.semantic.model_check import parse_model_verdict, verifier_messages
from daari.semantic.pair_model import PairModel, load_pair_model, pair_model_verdict

log = logging.getLogger("daari.l1")

VerifyMode = Literal["none", "lexical", "pair_model", "model"]
AskModel = Callable[[list[Message]], Awaitable[str | None]]


@dataclass(frozen=True)
class Verify(Call[Verdict]):
    """Whether `candidate` (a stored prompt) asks for the same thing as `query`."""

    query: str
    candidate: str
    similarity: float | None = None  # their embeddings' cosine (pair_model reads it)


class VerifierActor(Actor):
    name = "verifier"

    def __init__(self, mode: VerifyMode, ask_model: AskModel | None = None, model_wait_s: float = 30.0) -> None:
        self.mode = mode
        self.ask_model = ask_model
        self.model_wait_s = model_wait_s
        self.pair_model: PairModel | None = None
        self.loaded = trio.Event()  # set once the pair model's load ended, either way (at once for other modes)

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            if self.mode == "pair_model" and self.pair_model is None:
                nursery.start_soon(self._load)
            else:
                self.loaded.set()
            yield
            nursery.cancel_scope.cancel()

    async def _load(self) -> None:
        try:
            self.pair_model = await trio.to_thread.run_sync(load_pair_model, abandon_on_cancel=True)
        except Exception as exc:  # a broken weights file leaves the lexical rules in charge, never the server down
            log.error("L1 verify=pair_model: the pair model did not load (%s); verifying with the lexical rules",
                      exc)
        self.loaded.set()

    @handles(Verify)
    async def verify(self, request: Verify) -> Verdict:
        if self.mode == "none":
            return SAME
        if self.mode == "pair_model" and self.pair_model is not None and request.similarity is not None:
            return pair_model_verdict(self.pair_model, request.query, request.candidate, request.similarity)
        verdict = lexical_verdict(request.query, request.candidate)
        if self.mode != "model" or not verdict.same:
            return verdict
        if self.ask_model is None:
            return parse_model_verdict(None)
        reply = None
        with trio.move_on_after(self.model_wait_s):
            reply = await self.ask_model(verifier_messages(request.query, request.candidate))
        return parse_model_verdict(reply)
