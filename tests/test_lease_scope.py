"""A generation on a lent slot enters one cancel scope: the resilience wrapper's attempt scope is also the lease's
(`Lease.hold`), so the actor has no scope of its own around it. The ExecutorActor's revokes and the wrapper's
deadlines share that scope and must still be told apart: the actor stopping mid-attempt or in the backoff between
attempts is `actor_down` (not a timeout, not counted by the breaker), a background generation a client needs the
slot of is `Preempted`, a deadline under the lease is the wrapper's timeout (counted), and an inner executor that
turns a revoke's cancellation into its own error keeps that error, as it did past a scope of the actor's own.

Trio-native on virtual time (MockClock): the scheduling is what is tested.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors.executor import Preempted
from daari.config import RetryConfig, TierConfig, TimeoutsConfig
from daari.errors import ActorDown, UpstreamError, UpstreamTimeout
from daari.executors.base import Collect, Emit, Executor
from daari.executors.resilience import ResilientExecutor
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import Event, Finish, KeepAlive, TextDelta, assemble
from tests.test_generation_lease import supervised


def ask(model: str) -> ChatRequest:
    return ChatRequest(messages=[Message("user", "tell me about trio")], model=model)


class Scripted(Executor):
    """By the request's model: `hold` (headers in, then waits forever), `silent` (never answers), `busy` (a
    retryable 503 before any byte), `swallow` (waits; turns a cancellation into its own error), else an answer."""

    kind = "openai"

    def __init__(self) -> None:
        super().__init__("L3", TierConfig(
            executor="openai", base_url="http://unused", max_concurrency=1,
            timeouts=TimeoutsConfig(first_byte_s=50.0, idle_s=40.0, total_s=600.0),
            retry=RetryConfig(max_retries=2, backoff_initial_s=10.0, backoff_max_s=10.0)))
        self.attempts = 0

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        self.attempts += 1
        if request.model == "busy":
            raise UpstreamError("busy", upstream_status=503, retryable=True)
        if request.model == "swallow":
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                raise RuntimeError("the executor's own error") from None
        if request.model != "silent":
            await emit(KeepAlive())
        if request.model in ("hold", "silent"):
            await trio.sleep_forever()
        await emit(TextDelta(f"answer to {request.model}"))
        await emit(Finish("stop"))


@pytest.fixture
def virtual_time(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    mock_clock.autojump_threshold = 0
    return mock_clock


async def answer(actor: object, model: str, out: list[object], *, background: bool = False) -> None:
    events: list[Event] = []
    try:
        await actor.generations.run("L3", ask(model), Collect(events), background=background)  # type: ignore[attr-defined]
    except Exception as exc:
        out.append(exc)
    else:
        out.append(assemble(events).text)


async def stop_at(seconds: float, stop: trio.CancelScope) -> None:
    await trio.sleep(seconds)
    stop.cancel()


@pytest.mark.parametrize("model", ["hold", "busy"])
async def test_the_actor_stopping_mid_attempt_or_in_the_backoff_is_actor_down(virtual_time: trio.testing.MockClock,
                                                                            model: str) -> None:
    wrapper = ResilientExecutor(Scripted())
    async with supervised({"L3": wrapper}) as (actor, stop):
        out: list[object] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_at, 5.0, stop)  # before any deadline (40 s) and inside the first backoff (10 s)
            await answer(actor, model, out)
        assert virtual_time.current_time() == pytest.approx(5.0)
        assert len(out) == 1 and isinstance(out[0], ActorDown), out
        assert "stopped before finishing" in str(out[0])
        assert wrapper.inner.attempts == 1  # type: ignore[attr-defined]
        assert wrapper.breaker.consecutive_failures == (1 if model == "busy" else 0)  # a stop is no failure
        assert not actor.runs[-1].leases


async def test_a_deadline_under_the_lease_is_the_wrappers_timeout(virtual_time: trio.testing.MockClock) -> None:
    wrapper = ResilientExecutor(Scripted())
    async with supervised({"L3": wrapper}) as (actor, _):
        out: list[object] = []
        await answer(actor, "silent", out)
        assert isinstance(out[0], UpstreamTimeout) and "first_byte timeout" in str(out[0])
        assert virtual_time.current_time() == pytest.approx(50.0)
        out.clear()
        await answer(actor, "hold", out)  # headers in, then nothing: the idle deadline
        assert isinstance(out[0], UpstreamTimeout) and "idle timeout" in str(out[0])
        assert wrapper.breaker.consecutive_failures == 2  # both counted
        run = actor.runs[-1]
        assert not run.leases and run.limiters["L3"].borrowed_tokens == 0 and len(actor.runs) == 1
        out.clear()
        await answer(actor, "next", out)  # the slot is free and the scope of the last one left nothing behind
        assert out == ["answer to next"]


async def test_a_background_generation_gives_its_slot_to_a_client(virtual_time: trio.testing.MockClock) -> None:
    wrapper = ResilientExecutor(Scripted())
    async with supervised({"L3": wrapper}) as (actor, _):
        background: list[object] = []
        client: list[object] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: answer(actor, "hold", background, background=True))
            await trio.sleep(1.0)  # the background generation holds the only slot, mid-attempt
            await answer(actor, "quick", client)
        assert isinstance(background[0], Preempted) and client == ["answer to quick"]
        assert virtual_time.current_time() == pytest.approx(1.0)
        assert wrapper.breaker.consecutive_failures == 0


async def test_a_revoke_an_executor_turned_into_its_own_error_keeps_that_error(
        virtual_time: trio.testing.MockClock) -> None:
    wrapper = ResilientExecutor(Scripted())
    async with supervised({"L3": wrapper}) as (actor, stop):
        out: list[object] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_at, 5.0, stop)
            await answer(actor, "swallow", out)
        # Not a timeout (no deadline passed) nor actor_down (the scope caught no cancellation): the executor's
        # own failure, as the actor reports one.
        assert isinstance(out[0], UpstreamError) and not isinstance(out[0], UpstreamTimeout | ActorDown)
        assert "RuntimeError" in str(out[0])
