"""One table of actors: each row names an actor, how to build it, its mailbox size and restart policy.

`ActorTable` opens every mailbox up front (so addresses exist before anything starts, to wire them into
the objects that will ask), then `start` runs a supervisor per row in table order, each ready before the
next starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import trio

from actors.runtime.actor import Actor
from actors.runtime.faults import Faults
from actors.runtime.health import Health
from actors.runtime.mailbox import Address, Mailbox
from actors.runtime.supervisor import RestartPolicy, supervise


@dataclass(frozen=True)
class ActorSpec:
    name: str
    factory: Callable[[], Actor]
    mailbox_size: int = 64
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    stream_buffer: int = 64  # items an asker's stream holds before the actor waits for it to read
    # False: the program runs without it (a decision log that cannot open): the table does not wait for its first
    # run, a failure to start is restarted like a crash, and its state does not make the program unhealthy.
    required: bool = True
    on_down: Callable[[], None] | None = None  # called once the supervisor gives up or stops (no more runs)


class ActorTable:
    def __init__(self, specs: Sequence[ActorSpec], faults: Faults = Faults()) -> None:
        names = [spec.name for spec in specs]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"two actors named {name}")
        self.specs = list(specs)
        self.mailboxes = {spec.name: Mailbox(spec.name, spec.mailbox_size, faults, spec.stream_buffer)
                          for spec in specs}

    def address(self, name: str) -> Address:
        return self.mailboxes[name].address

    def get(self, name: str) -> Address | None:
        """The address of `name`, or None when the table has no such row (an optional actor)."""
        mailbox = self.mailboxes.get(name)
        return mailbox.address if mailbox is not None else None

    async def start(self, nursery: trio.Nursery, health: Health) -> None:
        for spec in self.specs:
            await nursery.start(partial(supervise, spec.factory, self.mailboxes[spec.name],
                                        health.status(spec.name, required=spec.required), spec.policy,
                                        required=spec.required, on_down=spec.on_down))


async def start_actors(nursery: trio.Nursery, specs: Sequence[ActorSpec], health: Health,
                       faults: Faults = Faults()) -> dict[str, Address]:
    """Start `specs` and return their addresses by name (for a table nobody needs to address early)."""
    table = ActorTable(specs, faults)
    await table.start(nursery, health)
    return {spec.name: table.address(spec.name) for spec in specs}
