"""A small Erlang-style actor runtime on Trio, and daari's actors built on it.

Public API: `Address` (ask/tell a running actor), `Actor` (what an actor implements), `supervise`
(run an actor, restart it on crash), `Health` (what the supervisors report to /healthz and metrics).
"""

from actors.actor import Actor
from actors.health import ActorStatus, Health
from actors.mailbox import Address, Envelope, open_mailbox
from actors.supervisor import RestartPolicy, supervise

__all__ = [
    "Actor",
    "ActorStatus",
    "Address",
    "Envelope",
    "Health",
    "RestartPolicy",
    "open_mailbox",
    "supervise",
]
