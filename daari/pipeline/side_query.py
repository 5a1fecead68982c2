"""Asking a tier a short side question (self-evaluation, Phase B classification) and reading its text."""

from __future__ import annotations

from actors.executor import OpenGeneration
from daari.errors import DaariError
from daari.pipeline.runtime import Runtime
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import assemble


async def ask_tier(rt: Runtime, tier: str, messages: list[Message], model: str, max_tokens: int) -> str | None:
    """The tier's greedy answer to `messages`, or None when the tier failed: a side question never fails
    the request it serves."""
    probe = ChatRequest(messages=messages, model=model, temperature=0.0, sampling={"max_tokens": max_tokens})
    try:
        async with rt.executor.stream(OpenGeneration(tier, probe)) as generation:
            return assemble([event async for event in generation]).text
    except (DaariError, ValueError):
        return None
