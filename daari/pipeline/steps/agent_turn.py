"""ADR-0004: whether the request is an agent turn. Reads: the parsed request. Decides: `daari_meta.agent_turn`,
which keeps every shortcut tier but the agent-prefix L1 away from it (steps/shortcut.py)."""

from __future__ import annotations

from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.routing.agent_turn import is_agent_turn


class AgentTurnStep:
    name = "agent_turn"

    async def __call__(self, turn: Turn) -> Answer | None:
        turn.meta.agent_turn = is_agent_turn(turn.request)
        return None
