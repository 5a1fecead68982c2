"""ADR-0004: whether the request is an agent turn. Reads: the parsed request (every route tools can take, and the
shapes daari does not know). Decides: `daari_meta.agent_turn`, which keeps every shortcut tier but the
agent-prefix L1 away from it (steps/shortcut.py); counts the unknown shapes (pipeline/wire_shapes.py)."""

from __future__ import annotations

from daari.metrics import Metrics
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.pipeline.wire_shapes import count_unknown_shapes
from daari.routing.agent_turn import is_agent_turn


class AgentTurnStep:
    name = "agent_turn"

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    async def __call__(self, turn: Turn) -> Answer | None:
        request = turn.request
        turn.meta.agent_turn = is_agent_turn(request)
        count_unknown_shapes(self.metrics, request)
        return None
