"""What an actor is: a resource it owns, a `handle` for each message, one message at a time.

Expected failures (`DaariError`) are answered as values and the actor goes on; any other exception is
answered to the asker too, then crashes the actor so that its supervisor restarts it with fresh state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import outcome
import trio

from actors.mailbox import Envelope
from daari.errors import DaariError


class ActorCrashed(DaariError):
    status = 500
    code = "actor_crashed"


class Actor(ABC):
    name = "actor"

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Acquire the actor's resource; the default owns nothing. Override as an asynccontextmanager."""
        return _nothing()

    @abstractmethod
    async def handle(self, request: Any) -> Any:
        """Answer one message; the return value is the reply."""

    async def run(
        self,
        inbox: trio.MemoryReceiveChannel[Envelope[Any]],
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # The clone is closed however the run ends, a lifespan that fails to start included: once the
        # supervisor gives up, no clone keeps the mailbox open and asks fail fast instead of hanging.
        async with inbox, self.lifespan():
            task_status.started()
            async for envelope in inbox:
                await self._dispatch(envelope)

    async def _dispatch(self, envelope: Envelope[Any]) -> None:
        try:
            value = await self.handle(envelope.request)
        except DaariError as exc:
            envelope.answer(outcome.Error(exc))
        except Exception as exc:
            envelope.answer(outcome.Error(ActorCrashed(f"{self.name} failed: {type(exc).__name__}")))
            raise
        else:
            envelope.answer(outcome.Value(value))


@asynccontextmanager
async def _nothing():  # type: ignore[no-untyped-def]
    yield
