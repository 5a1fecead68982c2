"""Whose spend a call is: the request's project, client family and session (docs/budget.md), for the attempts that
answer it and the side calls made for it (self-check, Phase B classifier question, shadow call)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from daari.budget.project import NO_PROJECT
from daari.pipeline.client_family import client_family
from daari.pipeline.turn import Turn
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event
from daari.sessions.identity import session_key


@dataclass(frozen=True, slots=True)
class Payer:
    project: str
    client: str
    session: str = ""


def payer_of(turn: Turn) -> Payer:
    """The session is the session step's, or (a side call made before it ran: the Phase B classifier's) the key it
    will find."""
    return Payer(str(turn.meta.details.get("project") or NO_PROJECT), client_family(turn.headers.get("user-agent")),
                 turn.meta.session or session_key(turn.request, turn.headers))


# A side call at `tier` ended after these events (SpendRecorder.side): (purpose, payer or None for daari's own
# calls, tier, the request it was sent, events). Counted once, shielded, wherever the call ends.
SideSpend = Callable[[str, Payer | None, str, ChatRequest, list[Event]], Awaitable[None]]
