"""What supervisors report: each actor's state and restart count, for /healthz and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

State = Literal["starting", "running", "restarting", "failed", "stopped"]


@dataclass
class ActorStatus:
    name: str
    state: State = "starting"
    restarts: int = 0
    last_error: str | None = None
    required: bool = True  # False: the program runs without it (its failure does not make it unhealthy)


@dataclass
class Health:
    actors: dict[str, ActorStatus] = field(default_factory=dict)

    def status(self, name: str, *, required: bool = True) -> ActorStatus:
        return self.actors.setdefault(name, ActorStatus(name, required=required))

    @property
    def healthy(self) -> bool:
        return bool(self.actors) and all(s.state == "running" for s in self.actors.values() if s.required)
