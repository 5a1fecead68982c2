"""The runtime's own failures, and how a program maps them to its error types (`Faults`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


class ActorFault(Exception):
    """Something went wrong in the runtime rather than in the request: the actor is busy, down or crashed."""

    def __init__(self, actor: str, message: str) -> None:
        super().__init__(message)
        self.actor = actor
        self.message = message


class ActorBusy(ActorFault):
    """The mailbox is full and the asker chose to be shed rather than wait."""


class ActorDown(ActorFault):
    """The actor stopped or its supervisor gave up: nothing will answer."""


class ActorCrashed(ActorFault):
    """The handler raised an unexpected exception while working on this request."""


def _same(fault: ActorFault) -> BaseException:
    return fault


@dataclass(frozen=True)
class Faults:
    """What counts as an answer and what the asker sees when the runtime fails.

    `expected`: exceptions a handler raises as its answer (the actor goes on); any other exception from a
    serial handler crashes the actor. `translate`: the exception raised in the asker for a runtime fault.
    """

    expected: tuple[type[BaseException], ...] = ()
    translate: Callable[[ActorFault], BaseException] = field(default=_same)
