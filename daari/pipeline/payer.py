"""Who pays for a request's calls, from the turn: its project, client family and session (daari/budget/payer.py
holds `Payer` and the side-call hook)."""

from __future__ import annotations

from daari.budget.payer import Payer
from daari.budget.project import NO_PROJECT
from daari.pipeline.client_family import client_family
from daari.pipeline.turn import Turn
from daari.sessions.identity import session_key


def payer_of(turn: Turn) -> Payer:
    """The session is the session step's, or (a side call made before it ran: the Phase B classifier's) the key it
    will find."""
    return Payer(str(turn.meta.details.get("project") or NO_PROJECT), client_family(turn.headers.get("user-agent")),
                 turn.meta.session or session_key(turn.request, turn.headers))
