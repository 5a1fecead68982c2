"""Routing spec step 13: the accepted answer written to L0 before its last bytes go out (so an identical request
right after is a hit), then shown to the answer indexes (L1) so they can serve its paraphrases.

Reads: the answer (its `store` flag, set by the step that produced it), the request's key and classification.
Decides: nothing for the client; a cache that cannot take the answer is bypassed (pipeline/cache_guard.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from daari.cache.l0_store import L0Entry
from daari.pipeline.cache_guard import CacheGuard
from daari.pipeline.shortcuts import ShortcutQuery
from daari.pipeline.step import Answer
from daari.pipeline.steps.shortcut import shortcut_query
from daari.pipeline.turn import Turn
from daari.protocol.chat import ChatRequest, Completion

log = logging.getLogger("daari.pipeline")

STORABLE_FINISH = ("stop", "length", "tool_calls", "stop_sequence")


@runtime_checkable
class AnswerIndex(Protocol):
    """A tier that indexes answers L0 stored (L1); called after the put, it must not block."""

    name: str

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None: ...


class CacheWriteStep:
    name = "cache_write"

    def __init__(self, guard: CacheGuard, indexes: Sequence[AnswerIndex] = (),
                 holds_secret: Callable[[ChatRequest, Completion], bool] | None = None) -> None:
        self.guard = guard
        self.indexes = tuple(indexes)
        self.holds_secret = holds_secret  # privacy/cache_rule.py: such answers stay out of the stores on disk

    async def __call__(self, turn: Turn, answer: Answer) -> None:
        completion = answer.completion
        if not (answer.store and turn.cache_on and completion.finish_reason in STORABLE_FINISH):
            return
        if self.holds_secret is not None and self.holds_secret(turn.request, completion):
            turn.meta.details["not_cached"] = "secret"
            return
        meta = turn.meta
        entry = L0Entry(completion=completion, tier=answer.tier, agent_turn=meta.agent_turn,
                        semantic_ok=not (meta.agent_turn or completion.tool_calls), confidence=answer.confidence,
                        task_type=meta.task_type, rule_id=meta.rule_id, ceiling=meta.ceiling)
        if not await self.guard.put(turn.key, entry, meta) or not self.indexes:
            return
        query = shortcut_query(turn)
        for index in self.indexes:
            try:
                await index.remember(query, completion, answer.tier)
            except Exception:  # the answer stands; an index that fails to remember must not change that
                log.exception("%s failed to remember an answer", index.name)
