"""A small, generic actor runtime on Trio (imports nothing from daari).

Typed calls and streams (`Call[R]`, `Stream[T]`), asker-owned replies (`Reply`, `Outbox`), handlers by
message type (`handles`, `batches`, `streams`), bounded mailboxes (`Address`), supervision with restart
policies (`supervise`), and one table of actors (`ActorSpec`, `start_actors`). See docs/architecture.md.
"""

from actors.runtime.actor import Actor, Pending, batches, handles, streams
from actors.runtime.faults import ActorBusy, ActorCrashed, ActorDown, ActorFault, Faults
from actors.runtime.health import ActorStatus, Health
from actors.runtime.mailbox import Address, Envelope, Mailbox
from actors.runtime.messages import Call, Stream
from actors.runtime.registry import ActorSpec, ActorTable, start_actors
from actors.runtime.reply import Outbox, Reply, StreamReader
from actors.runtime.supervisor import RestartPolicy, supervise

__all__ = [
    "Actor", "ActorBusy", "ActorCrashed", "ActorDown", "ActorFault", "ActorSpec", "ActorStatus", "ActorTable",
    "Address", "Call", "Envelope", "Faults", "Health", "Mailbox", "Outbox", "Pending", "Reply", "RestartPolicy",
    "Stream", "StreamReader", "batches", "handles", "start_actors", "streams", "supervise",
]
