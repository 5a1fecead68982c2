"""Run an actor and restart it when it crashes: backoff, a cap per window, then report it failed.

The supervisor owns the mailbox and gives each run a `clone()` of the receive end, so a crash does not
close the actor's address: messages wait in the mailbox for the next run.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from actors.actor import Actor
from actors.health import Health
from actors.mailbox import Envelope

log = logging.getLogger("daari.actors")


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5
    window_s: float = 60.0
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 5.0


async def supervise(
    factory: Callable[[], Actor],
    inbox: trio.MemoryReceiveChannel[Envelope[Any]],
    health: Health,
    policy: RestartPolicy = RestartPolicy(),
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Start with `nursery.start(supervise, ...)`: returns to the starter once the first run is ready."""
    actor = factory()
    status = health.status(actor.name)
    crashes: deque[float] = deque()
    backoff = policy.backoff_initial_s
    started = False
    async with inbox:
        while True:
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(actor.run, inbox.clone())
                    status.state = "running"
                    if not started:
                        started = True
                        task_status.started()
                status.state = "stopped"
                return
            except Exception as exc:
                # An ExceptionGroup from the actor's own nursery is a crash like any other.
                status.last_error = _describe(exc)
                log.warning("actor %s crashed: %s", actor.name, status.last_error)
                if not started:
                    raise  # an actor that cannot start at all is a start-up error, not a restart
            now = trio.current_time()
            crashes.append(now)
            while crashes and crashes[0] < now - policy.window_s:
                crashes.popleft()
            if len(crashes) > policy.max_restarts:
                status.state = "failed"
                log.error("actor %s crashed %d times in %.0fs; giving up", actor.name, len(crashes),
                          policy.window_s)
                return
            status.state = "restarting"
            status.restarts += 1
            await trio.sleep(backoff)
            backoff = min(policy.backoff_max_s, backoff * 2)
            actor = factory()



def _describe(exc: BaseException) -> str:
    """The crash's root cause, out of the nursery's exception group, for /healthz and the log."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:200]
