"""Asking a tier a short side question (self-evaluation, Phase B classification, the model verifier) and reading
its text. A priced tier bills it: each question whose upstream started answering goes to `spend` once it ended
(docs/budget.md, "Side calls")."""

from __future__ import annotations

from collections.abc import Callable

import trio

from actors.executor import Generations
from daari.budget.payer import Payer, SideSpend
from daari.errors import DaariError
from daari.executors.base import Collect
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import Event, assemble

# What a tier may be sent (privacy: secrets redacted for a remote tier; steps/privacy.py `PrivacyGuard.shield`).
Shield = Callable[[str, ChatRequest], ChatRequest]


class SideQuestions:
    def __init__(self, generations: Generations, shield: Shield | None = None, spend: SideSpend | None = None) -> None:
        self.generations = generations
        self.shield = shield
        self.spend = spend

    async def ask(self, tier: str, messages: list[Message], model: str, max_tokens: int, *,
                  purpose: str, payer: Payer | None = None) -> str | None:
        """The tier's greedy answer to `messages`, or None when the tier failed: a side question never fails the
        request it serves. Its cost is counted as `purpose` to `payer` (None: daari's own)."""
        probe = ChatRequest(messages=messages, model=model, temperature=0.0, sampling={"max_tokens": max_tokens})
        if self.shield is not None:
            probe = self.shield(tier, probe)  # a verdict needs no restoring: its placeholders stay
        events: list[Event] = []
        try:
            await self.generations.run(tier, probe, Collect(events))
            return assemble(events).text
        except (DaariError, ValueError):
            return None
        finally:
            if self.spend is not None and events:  # the upstream started answering: it billed the question
                with trio.CancelScope(shield=True):
                    await self.spend(purpose, payer, tier, probe, events)
