"""VerifierActor: the second check an L1 candidate must pass (`cache.l1.verify`: none | lexical | model).

`lexical` answers at once (pure rules, microseconds). `model` runs the lexical rules first, then asks a
local model through `ask_model`, one question at a time (the CPU budget of in-process inference); a model
that fails, is busy past `model_wait_s`, or answers anything but YES/NO rejects the candidate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import trio

from actors.runtime import Actor, Call, handles
from daari.protocol.chat import Message
from daari.semantic.lexical import SAME, Verdict, lexical_verdict
from daari.semantic.model_check import parse_model_verdict, verifier_messages

VerifyMode = Literal["none", "lexical", "model"]
AskModel = Callable[[list[Message]], Awaitable[str | None]]


@dataclass(frozen=True)
class Verify(Call[Verdict]):
    """Whether `candidate` (a stored prompt) asks for the same thing as `query`."""

    query: str
    candidate: str


class VerifierActor(Actor):
    name = "verifier"

    def __init__(self, mode: VerifyMode, ask_model: AskModel | None = None, model_wait_s: float = 30.0) -> None:
        self.mode = mode
        self.ask_model = ask_model
        self.model_wait_s = model_wait_s

    @handles(Verify)
    async def verify(self, request: Verify) -> Verdict:
        if self.mode == "none":
            return SAME
        verdict = lexical_verdict(request.query, request.candidate)
        if self.mode == "lexical" or not verdict.same:
            return verdict
        if self.ask_model is None:
            return parse_model_verdict(None)
        reply = None
        with trio.move_on_after(self.model_wait_s):
            reply = await self.ask_model(verifier_messages(request.query, request.candidate))
        return parse_model_verdict(reply)
