"""What supervisors report: each actor's state, restart count and queue depth, for /healthz and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

State = Literal["starting", "running", "restarting", "failed", "stopped"]


class Queue(Protocol):
    """An actor's mailbox as health sees it (actors/runtime/mailbox.py `Mailbox`)."""

    @property
    def depth(self) -> int: ...

    @property
    def capacity(self) -> int: ...


@dataclass
class ActorStatus:
    name: str
    state: State = "starting"
    restarts: int = 0
    last_error: str | None = None
    required: bool = True  # False: the program runs without it (its failure does not make it unhealthy)
    queue: Queue | None = field(default=None, repr=False, compare=False)  # set by the supervisor

    @property
    def depth(self) -> int:
        """Messages waiting in the mailbox now (not those being handled)."""
        return self.queue.depth if self.queue is not None else 0

    @property
    def capacity(self) -> int:
        return self.queue.capacity if self.queue is not None else 0


@dataclass
class Health:
    actors: dict[str, ActorStatus] = field(default_factory=dict)

    def status(self, name: str, *, required: bool = True) -> ActorStatus:
        return self.actors.setdefault(name, ActorStatus(name, required=required))

    @property
    def healthy(self) -> bool:
        return bool(self.actors) and all(s.state == "running" for s in self.actors.values() if s.required)
