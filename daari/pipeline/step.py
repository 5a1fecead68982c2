"""The request as steps: the protocol each step implements, the `Answer` an answering step returns, and the
`Pipeline` that runs the steps in order.

A step is `async def __call__(turn) -> Answer | None`: None lets the request go on to the next step; an Answer
ends the walk, and the finishing steps (cache write, render) take it. A new tier plugs in as a step in the
list the composition root builds (daari/server/compose.py), without editing the others.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from daari.cpu_budget import request_work
from daari.errors import DaariError
from daari.pipeline.turn import Turn
from daari.protocol.chat import Completion
from daari.protocol.events import Event

log = logging.getLogger("daari.pipeline")


@dataclass(slots=True)
class Answer:
    """What answers the request: who (`tier`, and `executor`: "cache", "shortcut" or the tier's executor kind),
    the completion with the events that render it, its confidence, and whether L0 may store it."""

    tier: str
    executor: str
    completion: Completion
    events: list[Event]
    confidence: float | None = None
    store: bool = False


class Step(Protocol):
    name: str

    async def __call__(self, turn: Turn) -> Answer | None: ...


class Finish(Protocol):
    """A step after the answer: the cache write, the render (and later observers of answers)."""

    name: str

    async def __call__(self, turn: Turn, answer: Answer) -> None: ...


class Failure(Protocol):
    """How a request that fails after it was parsed is answered: in its protocol's error shape, with daari_meta."""

    async def __call__(self, turn: Turn, err: DaariError) -> None: ...


class NoAnswer(DaariError):
    """The pipeline ran out of steps: its last step (execute) answers or raises, so this is a wiring bug."""


class Pipeline:
    """`local` steps wait on nothing outside daari (headers, L0, parse): a hit is answered without watching its
    client. Then `routed` steps run under the client watch, so a client that leaves cancels them all (upstream
    calls included). A failure before the request is parsed is a refusal: raised to the route, which answers it
    and records it as refused before routing."""

    def __init__(self, local: Sequence[Step], routed: Sequence[Step], finish: Sequence[Finish],
                 fail: Failure) -> None:
        self.local = tuple(local)
        self.routed = tuple(routed)
        self.finish = tuple(finish)
        self.fail = fail

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.local + self.routed

    async def run(self, turn: Turn) -> None:
        # The steps are walked in this frame, not in helpers: while a step waits (the upstream call), each time
        # its task yields and resumes, every coroutine frame between the server's task and the wait is suspended
        # and resumed with it; a helper frame is paid once per resume, not once per request.
        answer: Answer | None = None
        try:
            # Parsing, hashing and L0 are request work: an embedded generation pauses between tokens meanwhile.
            with request_work():
                for step in self.local:
                    answer = await step(turn)
                    if answer is not None:
                        break
        except Exception as exc:
            if not turn.parsed:
                raise  # refused before routing: the route answers it in the client's shape
            await self._failed(turn, exc)
            return
        if answer is not None:
            try:
                for finish in self.finish:
                    await finish(turn, answer)
            except Exception as exc:
                await self._failed(turn, exc)
            return
        async with turn.watch_client():
            try:
                for step in self.routed:
                    answer = await step(turn)
                    if answer is not None:
                        break
                if answer is None:
                    raise NoAnswer("no pipeline step answered the request")
                for finish in self.finish:
                    await finish(turn, answer)
            except Exception as exc:
                await self._failed(turn, exc)

    async def _failed(self, turn: Turn, exc: Exception) -> None:
        if isinstance(exc, DaariError):
            await self.fail(turn, exc)
            return
        log.exception("pipeline failed", exc_info=exc)
        await self.fail(turn, DaariError("internal error in daari; see the server log"))

