"""One request's view of its session, set by the session step and read by affinity, hygiene and the record step."""

from __future__ import annotations

from dataclasses import dataclass

from daari.sessions.store import SessionState, Warmth


@dataclass(slots=True)
class SessionTurn:
    key: str  # the session, hashed (sessions/identity.py)
    state: SessionState  # the session as the store keeps it (updated once the answer is known)
    home: Warmth | None  # the provider cache that was warm when this request arrived (a copy)
    estimate: int  # daari's estimate of this request's prompt tokens
    writes_cache: bool  # the client marked the prompt for caching (Anthropic cache_control)
    ttl_s: float  # how long what this request writes stays cached
