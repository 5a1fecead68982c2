"""Asking a tier a short side question (self-evaluation, Phase B classification, the model verifier) and reading
its text."""

from __future__ import annotations

from collections.abc import Callable

from actors.executor import OpenGeneration
from actors.runtime import Address
from daari.errors import DaariError
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import assemble

# What a tier may be sent (privacy: secrets redacted for a remote tier; steps/privacy.py `PrivacyGuard.shield`).
Shield = Callable[[str, ChatRequest], ChatRequest]


class SideQuestions:
    def __init__(self, executor: Address, shield: Shield | None = None) -> None:
        self.executor = executor
        self.shield = shield

    async def ask(self, tier: str, messages: list[Message], model: str, max_tokens: int) -> str | None:
        """The tier's greedy answer to `messages`, or None when the tier failed: a side question never fails the
        request it serves."""
        probe = ChatRequest(messages=messages, model=model, temperature=0.0, sampling={"max_tokens": max_tokens})
        if self.shield is not None:
            probe = self.shield(tier, probe)  # a verdict needs no restoring: its placeholders stay
        try:
            async with self.executor.stream(OpenGeneration(tier, probe)) as generation:
                return assemble([event async for event in generation]).text
        except (DaariError, ValueError):
            return None
