"""Routing spec steps 4-8 as pipeline steps: one shortcut tier (CCS, L1, L2, Lt) answering before any model runs.

Reads: the parsed request, its headers, L0 key, partition and agent-turn flag. Decides: the tier's answer (never
stored in L0), or what it reported while declining (daari_meta details). The rule that matters for agents is
applied here, once: an agent turn is never answered by a shortcut tier, except one that says it serves agent
turns (the agent-prefix L1, ADR-0004 G1b); a tier override skips every shortcut.
"""

from __future__ import annotations

from daari.pipeline.shortcuts import ShortcutQuery, ShortcutTier
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.protocol.events import replay


class ShortcutStep:
    def __init__(self, tier: ShortcutTier) -> None:
        self.tier = tier
        self.name = tier.name

    async def __call__(self, turn: Turn) -> Answer | None:
        meta = turn.meta
        if turn.controls.tier_override is not None or (meta.agent_turn and not self.tier.serves_agent_turns):
            return None
        result = await self.tier.answer(shortcut_query(turn))
        if result is None:
            return None
        meta.details.update(result.details)
        completion = result.completion
        if completion is None:
            if result.draft is not None:
                turn.draft = result.draft
            return None
        if result.task_type is not None:
            meta.task_type = result.task_type
        if result.rule_id is not None:
            meta.rule_id = result.rule_id
        if result.cache_hit:  # a semantic match is a cache hit as an exact one is (the tier says which level)
            meta.cache_hit, meta.cache = True, "hit"
        return Answer(result.tier, "shortcut", completion, list(replay(completion)), result.confidence)


def shortcut_query(turn: Turn) -> ShortcutQuery:
    """What a shortcut tier (and an answer index, steps/cache_write.py) may look at."""
    classification = turn.classification
    return ShortcutQuery(turn.request, turn.headers, turn.key if turn.cache_on else "", partition=turn.partition,
                         agent_turn=turn.meta.agent_turn,
                         task_type=classification.task_type if classification is not None else None)
