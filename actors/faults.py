"""How the actor runtime's faults look to daari's clients: busy is 503 (Anthropic 529), a crash 500, an actor
that is down 503, each naming GET /healthz. Every daari actor's mailbox uses `FAULTS`."""

from __future__ import annotations

from actors import runtime
from actors.runtime import Faults
from daari.errors import ActorCrashed, ActorDown, DaariError, Overloaded


def client_error(fault: runtime.ActorFault) -> DaariError:
    """A runtime fault as the client sees it: 503 / Anthropic 529, or 500 for a crash."""
    if isinstance(fault, runtime.ActorBusy):
        return Overloaded(fault.message)
    if isinstance(fault, runtime.ActorCrashed):
        return ActorCrashed(f"{fault.message}; GET /healthz shows its state")
    return ActorDown(f"{fault.message}; GET /healthz shows why")


FAULTS = Faults(expected=(DaariError,), translate=client_error)
