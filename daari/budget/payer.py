"""Whose spend a call is (the request's project, client family and session, docs/budget.md), and the hook a side
call reports its events to: low enough for the actors (the ShadowActor's calls are spend too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event


@dataclass(frozen=True, slots=True)
class Payer:
    project: str
    client: str
    session: str = ""


# A side call at `tier` ended after these events (SpendRecorder.side): (purpose, payer or None for daari's own
# calls, tier, the request it was sent, events). Counted once, shielded, wherever the call ends.
SideSpend = Callable[[str, Payer | None, str, ChatRequest, list[Event]], Awaitable[None]]
