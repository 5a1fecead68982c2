"""Shapes of client requests daari does not know (an input item, content part, block or role type), counted
in `daari_unknown_request_shapes_total{protocol,kind}` so a new client shape is noticed. Such a turn is an
agent turn (routing/agent_turn.py): it is answered by a model tier, never by a shortcut on a guess."""

from __future__ import annotations

import logging

from daari.metrics import Metrics
from daari.protocol.chat import ChatRequest

log = logging.getLogger("daari.pipeline")

METRIC = "unknown_request_shapes_total"


def count_unknown_shapes(metrics: Metrics, request: ChatRequest) -> None:
    """One count per distinct unknown shape in the request (a shape repeated in one body counts once)."""
    for kind in sorted(set(request.shapes.unknown)):
        metrics.inc(METRIC, protocol=request.protocol, kind=kind)
        log.debug("request shape daari does not know: %s %s", request.protocol, kind)
