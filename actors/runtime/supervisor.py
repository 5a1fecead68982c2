"""Run an actor and restart it when it crashes: backoff, a cap per window, then give up and fail fast.

The supervisor owns the mailbox and gives each run a `clone()` of its receive end, so a crash does not close
the actor's address: messages wait in the mailbox for the next run. Giving up closes the address and fails
every queued message with `ActorDown`, so no asker ever waits on an actor that will not come back.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import trio

from actors.runtime.actor import Actor
from actors.runtime.faults import Faults
from actors.runtime.health import ActorStatus
from actors.runtime.mailbox import Mailbox

log = logging.getLogger("actors")


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5
    window_s: float = 60.0
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 5.0


async def supervise(
    factory: Callable[[], Actor],
    mailbox: Mailbox,
    status: ActorStatus,
    policy: RestartPolicy = RestartPolicy(),
    *,
    required: bool = True,
    on_down: Callable[[], None] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Start with `nursery.start(supervise, ...)`: returns to the starter once the first run is ready (at once for
    an actor that is not `required`, whose failure to start is then restarted like a crash). `on_down` is called
    when the supervisor ends: given up, stopped or cancelled."""
    crashes: deque[float] = deque()
    started = not required
    if not required:
        task_status.started()
    faults = mailbox.address.faults
    status.queue = mailbox
    try:
        while True:
            actor = factory()
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(_run, actor, mailbox, faults)
                    status.state = "running"
                    if not started:
                        started = True
                        task_status.started()
                status.state = "stopped"
                return
            except* Exception as crash:
                # Caught with except*: a crash that races a cancellation arrives in a group with Cancelled,
                # which goes on up after this block; the crash is recorded either way.
                status.last_error = _describe(crash)
                log.warning("actor %s crashed: %s", status.name, status.last_error)
                if not started:
                    raise  # an actor that cannot start at all is a start-up error, not a restart
            now = trio.current_time()
            crashes.append(now)
            while crashes and crashes[0] < now - policy.window_s:
                crashes.popleft()
            if len(crashes) > policy.max_restarts:
                status.state = "failed"
                log.error("actor %s crashed %d times in %.0fs; giving up", status.name, len(crashes),
                          policy.window_s)
                return
            status.state = "restarting"
            status.restarts += 1
            await trio.sleep(restart_backoff_s(policy, len(crashes)))
    finally:
        # Stopped, failed or cancelled: nothing will answer what is queued or sent later.
        reason = f"gave up after {status.last_error}" if status.state == "failed" else "stopped"
        mailbox.close_and_fail_queued(reason)
        if on_down is not None:
            on_down()


def restart_backoff_s(policy: RestartPolicy, recent_crashes: int) -> float:
    """The wait before the next run: doubling with each crash within the window, so it starts over once a
    window has passed without one (an actor healthy for a while is not punished for old crashes)."""
    return float(min(policy.backoff_max_s, policy.backoff_initial_s * 2 ** max(0, recent_crashes - 1)))


async def _run(actor: Actor, mailbox: Mailbox, faults: Faults, *,
               task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    await actor.serve_inbox(mailbox.inbox.clone(), faults, task_status=task_status)


def _describe(exc: BaseException) -> str:
    """The crash's root cause, out of the nursery's exception group, for /healthz and the log."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:200]
