"""Asking a tier a short side question (self-evaluation, Phase B classification, the model verifier) and reading
its text."""

from __future__ import annotations

from actors.executor import OpenGeneration
from actors.runtime import Address
from daari.errors import DaariError
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import assemble


class SideQuestions:
    def __init__(self, executor: Address) -> None:
        self.executor = executor

    async def ask(self, tier: str, messages: list[Message], model: str, max_tokens: int) -> str | None:
        """The tier's greedy answer to `messages`, or None when the tier failed: a side question never fails the
        request it serves."""
        probe = ChatRequest(messages=messages, model=model, temperature=0.0, sampling={"max_tokens": max_tokens})
        try:
            async with self.executor.stream(OpenGeneration(tier, probe)) as generation:
                return assemble([event async for event in generation]).text
        except (DaariError, ValueError):
            return None
