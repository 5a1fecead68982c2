"""ResilientExecutor: timeouts, retries and the breaker, against scripted fake executors on virtual time."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from daari.config import BreakerConfig, RetryConfig, TierConfig, TimeoutsConfig
from daari.errors import (
    InvalidRequest,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from daari.executors.base import Emit, Executor
from daari.executors.resilience import ResilientExecutor
from daari.protocol.chat import ChatRequest, Message, Usage
from daari.protocol.events import Event, Finish, KeepAlive, TextDelta, assemble

Script = Callable[[Emit], Awaitable[None]]

FIRST_BYTE = 10.0
IDLE = 5.0
TOTAL = 100.0


def tier_config(max_retries: int = 0, threshold: int = 3, cooldown: float = 30.0,
                retry_after_cap: float = 10.0) -> TierConfig:
    return TierConfig(
        executor="ollama", base_url="http://127.0.0.1:1", model="m",
        timeouts=TimeoutsConfig(connect_s=1.0, first_byte_s=FIRST_BYTE, idle_s=IDLE, total_s=TOTAL),
        retry=RetryConfig(max_retries=max_retries, backoff_initial_s=0.25, backoff_max_s=1.0,
                          retry_after_cap_s=retry_after_cap),
        breaker=BreakerConfig(failure_threshold=threshold, cooldown_s=cooldown),
    )


class ScriptedExecutor(Executor):
    """Runs the next script per call; the last script repeats."""

    kind = "scripted"
    supports_tools = True

    def __init__(self, config: TierConfig, *scripts: Script) -> None:
        super().__init__("L4", config)
        self.scripts = list(scripts)
        self.calls = 0
        self.lifecycle: list[str] = []

    async def start(self, nursery: trio.Nursery) -> None:
        self.lifecycle.append("start")

    async def aclose(self) -> None:
        self.lifecycle.append("aclose")

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        script = self.scripts[min(self.calls, len(self.scripts) - 1)]
        self.calls += 1
        await script(emit)

    def status(self) -> dict[str, object]:
        return {"calls": self.calls}


def answer(text: str = "hello world") -> Script:
    async def script(emit: Emit) -> None:
        for word in text.split(" "):
            await emit(TextDelta(word + " "))
        await emit(Finish("stop", Usage(3, 2)))
    return script


def fail(exc: Exception) -> Script:
    async def script(emit: Emit) -> None:
        raise exc
    return script


async def hang(emit: Emit) -> None:
    await trio.sleep_forever()


def emit_then(after: Script) -> Script:
    async def script(emit: Emit) -> None:
        await emit(TextDelta("partial"))
        await after(emit)
    return script


def server_error() -> UpstreamError:
    return UpstreamError("L4:scripted: upstream returned 500", upstream_status=500, retryable=True)


REQUEST = ChatRequest(messages=[Message("user", "hi")], model="m")


class Collector:
    def __init__(self, delay: float = 0.0) -> None:
        self.events: list[Event] = []
        self.delay = delay

    async def __call__(self, event: Event) -> None:
        if self.delay:
            await trio.sleep(self.delay)
        self.events.append(event)


@pytest.fixture
def virtual_time(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    mock_clock.autojump_threshold = 0
    return mock_clock


async def test_success_passes_events_through_and_closes_breaker(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(threshold=3, cooldown=30.0), fail(server_error()), answer("a b"))
    executor = ResilientExecutor(inner)
    with pytest.raises(UpstreamError):
        await executor.generate(REQUEST, Collector())
    assert executor.status()["breaker"]["consecutive_failures"] == 1
    out = Collector()
    await executor.generate(REQUEST, out)
    assert assemble(out.events).text == "a b "
    # Written out, not compared with the breaker's own snapshot: a success resets the failure count.
    assert executor.status() == {"calls": 2, "breaker": {"state": "closed", "consecutive_failures": 0,
                                                         "opened_at": None, "failure_threshold": 3,
                                                         "cooldown_s": 30.0}}


async def test_wrapper_presents_the_inner_executor() -> None:
    inner = ScriptedExecutor(tier_config())
    executor = ResilientExecutor(inner)
    assert (executor.name, executor.tier, executor.kind) == ("L4:scripted", "L4", "scripted")
    assert executor.supports_tools is True
    assert executor.model_names() == ["m"]
    assert await executor.list_models() == ["m"]
    assert executor.status()["breaker"]["state"] == "closed"
    async with trio.open_nursery() as nursery:
        await executor.start(nursery)
    await executor.aclose()
    assert inner.lifecycle == ["start", "aclose"]


async def test_hang_before_first_byte_times_out_after_first_byte_s(virtual_time: object) -> None:
    executor = ResilientExecutor(ScriptedExecutor(tier_config(), hang))
    start = trio.current_time()
    with pytest.raises(UpstreamTimeout) as info:
        await executor.generate(REQUEST, Collector())
    assert trio.current_time() - start == pytest.approx(FIRST_BYTE)
    assert "first_byte" in info.value.message
    assert "10s" in info.value.message
    assert "L4:scripted" in info.value.message
    assert info.value.status == 504


async def test_first_byte_timeout_is_not_retried(virtual_time: object) -> None:
    # The request was sent: the upstream may be generating, and a retry would pay for the answer again.
    inner = ScriptedExecutor(tier_config(max_retries=2), hang, answer())
    executor = ResilientExecutor(inner)
    start = trio.current_time()
    with pytest.raises(UpstreamTimeout) as info:
        await executor.generate(REQUEST, Collector())
    assert "first_byte" in info.value.message
    assert inner.calls == 1
    assert trio.current_time() - start == pytest.approx(FIRST_BYTE)


async def test_headers_end_the_first_byte_wait_and_the_body_gets_idle_s(virtual_time: object) -> None:
    async def headers_then_slow_body(emit: Emit) -> None:
        await emit(KeepAlive())  # what HTTP executors emit once response headers are in
        await trio.sleep(IDLE * 0.9)  # past first_byte_s, within idle_s
        await answer("late")(emit)

    config = tier_config(max_retries=2)
    config.timeouts = TimeoutsConfig(connect_s=1.0, first_byte_s=IDLE / 2, idle_s=IDLE, total_s=TOTAL)
    inner = ScriptedExecutor(config, headers_then_slow_body)
    out = Collector()
    await ResilientExecutor(inner).generate(REQUEST, out)
    assert assemble(out.events).text == "late "
    assert inner.calls == 1
    assert not any(isinstance(e, KeepAlive) for e in out.events)  # liveness stays in the wrapper


async def test_nothing_is_retried_after_the_headers(virtual_time: object) -> None:
    async def headers_then_500(emit: Emit) -> None:
        await emit(KeepAlive())
        await fail(server_error())(emit)

    inner = ScriptedExecutor(tier_config(max_retries=2), headers_then_500, answer())
    with pytest.raises(UpstreamError):
        await ResilientExecutor(inner).generate(REQUEST, Collector())
    assert inner.calls == 1


async def test_idle_timeout_mid_stream_is_not_retried(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(max_retries=2), emit_then(hang), answer())
    executor = ResilientExecutor(inner)
    start = trio.current_time()
    out = Collector()
    with pytest.raises(UpstreamTimeout) as info:
        await executor.generate(REQUEST, out)
    assert "idle" in info.value.message and "5s" in info.value.message
    assert trio.current_time() - start == pytest.approx(IDLE)
    assert inner.calls == 1
    assert out.events == [TextDelta("partial")]


@pytest.mark.parametrize("delivered_at_once", [False, True], ids=["awaited emit", "no-wait emit"])
async def test_idle_deadline_rearms_after_each_event(virtual_time: object, delivered_at_once: bool) -> None:
    async def steady(emit: Emit) -> None:
        for _ in range(5):
            await trio.sleep(IDLE * 0.9)  # each gap is under idle_s, the sum is well over it
            await emit(TextDelta("x"))
        await emit(Finish("stop"))

    out = RoomyEmit(room=100) if delivered_at_once else Collector()
    await ResilientExecutor(ScriptedExecutor(tier_config(), steady)).generate(REQUEST, out)
    assert assemble(out.events).text == "xxxxx"
    if isinstance(out, RoomyEmit):
        assert out.waited == 0  # every event went in at once, and each re-armed the idle deadline


async def test_a_long_thinking_phase_with_keepalives_is_not_idle(virtual_time: object) -> None:
    async def thinks_then_answers(emit: Emit) -> None:
        for _ in range(10):  # reasoning for 10 x 0.5 idle_s, nothing visible but keep-alives
            await trio.sleep(IDLE * 0.5)
            await emit(KeepAlive())
        await emit(TextDelta("answer"))
        await emit(Finish("stop"))

    out = Collector()
    await ResilientExecutor(ScriptedExecutor(tier_config(), thinks_then_answers)).generate(REQUEST, out)
    assert assemble(out.events).text == "answer"


async def test_slow_downstream_emit_does_not_count_as_upstream_idle(virtual_time: object) -> None:
    async def gaps(emit: Emit) -> None:
        await emit(TextDelta("a"))
        await trio.sleep(IDLE * 0.8)
        await emit(TextDelta("b"))
        await emit(Finish("stop"))

    slow_client = Collector(delay=IDLE * 3)  # each emit takes longer than idle_s
    await ResilientExecutor(ScriptedExecutor(tier_config(), gaps)).generate(REQUEST, slow_client)
    assert assemble(slow_client.events).text == "ab"


async def test_slow_downstream_emit_does_not_count_as_first_byte_wait(virtual_time: object) -> None:
    slow_client = Collector(delay=FIRST_BYTE * 2)
    await ResilientExecutor(ScriptedExecutor(tier_config(), answer("a"))).generate(REQUEST, slow_client)
    assert assemble(slow_client.events).text == "a "


async def test_total_timeout_bounds_an_endless_stream(virtual_time: object) -> None:
    async def endless(emit: Emit) -> None:
        while True:
            await trio.sleep(IDLE / 2)
            await emit(TextDelta("."))

    start = trio.current_time()
    with pytest.raises(UpstreamTimeout) as info:
        await ResilientExecutor(ScriptedExecutor(tier_config(), endless)).generate(REQUEST, Collector())
    assert "total" in info.value.message and "100s" in info.value.message
    assert trio.current_time() - start == pytest.approx(TOTAL)


async def test_timeout_cancels_the_inner_call(virtual_time: object) -> None:
    cleaned_up: list[bool] = []

    async def stream_with_cleanup(emit: Emit) -> None:
        try:
            await trio.sleep_forever()
        finally:
            cleaned_up.append(True)  # where `async with client.stream` would close the connection

    with pytest.raises(UpstreamTimeout):
        await ResilientExecutor(ScriptedExecutor(tier_config(), stream_with_cleanup)).generate(
            REQUEST, Collector())
    assert cleaned_up == [True]


async def test_inner_error_raised_while_cancelled_is_still_reported_as_timeout(virtual_time: object) -> None:
    async def converts_cancel(emit: Emit) -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise UpstreamError("connection torn down")  # an executor that maps everything it sees

    executor = ResilientExecutor(ScriptedExecutor(tier_config(), converts_cancel))
    with pytest.raises(UpstreamTimeout) as info:
        await executor.generate(REQUEST, Collector())
    assert "first_byte" in info.value.message


async def test_500_then_success_is_retried_and_answers_once(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(max_retries=2), fail(server_error()), answer("ok"))
    executor = ResilientExecutor(inner)
    start = trio.current_time()
    out = Collector()
    await executor.generate(REQUEST, out)
    assert inner.calls == 2
    assert trio.current_time() - start == pytest.approx(0.25)
    assert [e for e in out.events if isinstance(e, Finish)] == [Finish("stop", Usage(3, 2))]
    assert assemble(out.events).text == "ok "
    assert executor.breaker.state == "closed" and executor.breaker.consecutive_failures == 0


async def test_backoff_doubles_and_is_capped(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(max_retries=4, threshold=10), fail(server_error()))
    start = trio.current_time()
    with pytest.raises(UpstreamError):
        await ResilientExecutor(inner).generate(REQUEST, Collector())
    assert inner.calls == 5
    assert trio.current_time() - start == pytest.approx(0.25 + 0.5 + 1.0 + 1.0)


async def test_429_retry_after_is_honoured(virtual_time: object) -> None:
    limited = UpstreamRateLimited("slow down", upstream_status=429, retryable=True, retry_after=3.0)
    inner = ScriptedExecutor(tier_config(max_retries=1), fail(limited), answer())
    start = trio.current_time()
    await ResilientExecutor(inner).generate(REQUEST, Collector())
    assert inner.calls == 2
    assert trio.current_time() - start == pytest.approx(3.0)


async def test_429_retry_after_is_capped(virtual_time: object) -> None:
    limited = UpstreamRateLimited("slow down", upstream_status=429, retryable=True, retry_after=3600.0)
    inner = ScriptedExecutor(tier_config(max_retries=1, retry_after_cap=10.0), fail(limited), answer())
    start = trio.current_time()
    await ResilientExecutor(inner).generate(REQUEST, Collector())
    assert trio.current_time() - start == pytest.approx(10.0)


async def test_error_after_first_emit_is_not_retried(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(max_retries=3), emit_then(fail(server_error())), answer())
    out = Collector()
    with pytest.raises(UpstreamError) as info:
        await ResilientExecutor(inner).generate(REQUEST, out)
    assert info.value.upstream_status == 500
    assert inner.calls == 1
    assert out.events == [TextDelta("partial")]


async def test_non_retryable_error_is_not_retried(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(max_retries=3), fail(UpstreamError("malformed NDJSON")), answer())
    with pytest.raises(UpstreamError, match="malformed"):
        await ResilientExecutor(inner).generate(REQUEST, Collector())
    assert inner.calls == 1


async def test_stream_without_finish_is_an_upstream_error(virtual_time: object) -> None:
    async def no_finish(emit: Emit) -> None:
        await emit(TextDelta("half"))

    executor = ResilientExecutor(ScriptedExecutor(tier_config(threshold=1), no_finish))
    with pytest.raises(UpstreamError, match="without a finish"):
        await executor.generate(REQUEST, Collector())
    assert executor.breaker.state == "open"


async def test_breaker_opens_after_threshold_failures_and_rejects(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(threshold=3), fail(server_error()))
    executor = ResilientExecutor(inner)
    for _ in range(3):
        with pytest.raises(UpstreamError):
            await executor.generate(REQUEST, Collector())
    assert executor.status()["breaker"]["state"] == "open"
    with pytest.raises(UpstreamUnavailable) as info:
        await executor.generate(REQUEST, Collector())
    assert info.value.message == "circuit open for L4:scripted"
    assert info.value.retryable is False
    assert info.value.status == 503
    assert inner.calls == 3  # the rejected request never reached the upstream


async def test_each_failed_attempt_counts_towards_the_breaker(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(max_retries=5, threshold=3), fail(server_error()))
    executor = ResilientExecutor(inner)
    with pytest.raises(UpstreamError) as info:
        await executor.generate(REQUEST, Collector())
    # The third failed attempt opened the circuit: the request stops retrying with its real error.
    assert inner.calls == 3
    assert info.value.upstream_status == 500
    assert executor.breaker.state == "open"


async def test_half_open_probe_after_cooldown_closes_on_success(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(threshold=2, cooldown=30.0),
                             fail(server_error()), fail(server_error()), answer("back"))
    executor = ResilientExecutor(inner)
    for _ in range(2):
        with pytest.raises(UpstreamError):
            await executor.generate(REQUEST, Collector())
    await trio.sleep(29.0)
    with pytest.raises(UpstreamUnavailable):
        await executor.generate(REQUEST, Collector())
    await trio.sleep(1.0)
    out = Collector()
    await executor.generate(REQUEST, out)
    assert assemble(out.events).text == "back "
    assert executor.breaker.snapshot()["state"] == "closed"


async def test_half_open_probe_failure_reopens(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(threshold=1, cooldown=30.0), fail(server_error()))
    executor = ResilientExecutor(inner)
    with pytest.raises(UpstreamError):
        await executor.generate(REQUEST, Collector())
    await trio.sleep(30.0)
    with pytest.raises(UpstreamError):  # the probe reached the upstream and failed
        await executor.generate(REQUEST, Collector())
    assert inner.calls == 2
    assert executor.breaker.state == "open"
    assert executor.breaker.opened_at == trio.current_time()
    with pytest.raises(UpstreamUnavailable):
        await executor.generate(REQUEST, Collector())
    assert inner.calls == 2


async def test_half_open_lets_one_probe_through_at_a_time(virtual_time: object) -> None:
    release = trio.Event()

    async def slow_answer(emit: Emit) -> None:
        await release.wait()
        await answer()(emit)

    inner = ScriptedExecutor(tier_config(threshold=1, cooldown=30.0), fail(server_error()), slow_answer)
    executor = ResilientExecutor(inner)
    with pytest.raises(UpstreamError):
        await executor.generate(REQUEST, Collector())
    await trio.sleep(30.0)
    probe_out = Collector()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(executor.generate, REQUEST, probe_out)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(UpstreamUnavailable):
            await executor.generate(REQUEST, Collector())
        release.set()
    assert assemble(probe_out.events).text == "hello world "
    assert executor.breaker.state == "closed"


async def test_client_cancellation_is_not_a_failure(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(threshold=1), hang)
    executor = ResilientExecutor(inner)
    with trio.move_on_after(1.0) as scope:  # the client goes away before the first byte
        await executor.generate(REQUEST, Collector())
    assert scope.cancelled_caught
    assert executor.breaker.snapshot()["state"] == "closed"
    assert executor.breaker.consecutive_failures == 0


async def test_cancelled_probe_frees_the_probe_slot(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(threshold=1, cooldown=30.0), fail(server_error()), hang, answer())
    executor = ResilientExecutor(inner)
    with pytest.raises(UpstreamError):
        await executor.generate(REQUEST, Collector())
    await trio.sleep(30.0)
    with trio.move_on_after(1.0):
        await executor.generate(REQUEST, Collector())  # the probe's client disconnects
    assert executor.breaker.state == "half_open"
    await executor.generate(REQUEST, Collector())  # the next request may probe
    assert executor.breaker.state == "closed"


async def test_cancellation_during_backoff_propagates(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(max_retries=3, threshold=10), fail(server_error()))
    with trio.move_on_after(0.1) as scope:
        await ResilientExecutor(inner).generate(REQUEST, Collector())
    assert scope.cancelled_caught
    assert inner.calls == 1


async def test_upstream_client_errors_do_not_count_against_the_upstream(virtual_time: object) -> None:
    missing = UpstreamError("model 'x' not found", upstream_status=404)
    inner = ScriptedExecutor(tier_config(threshold=1, max_retries=2), fail(missing))
    executor = ResilientExecutor(inner)
    for _ in range(3):
        with pytest.raises(UpstreamError, match="not found"):
            await executor.generate(REQUEST, Collector())
    assert inner.calls == 3  # not retried, and the circuit stays closed
    assert executor.breaker.state == "closed"


async def test_daari_side_errors_do_not_count_against_the_upstream(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(threshold=1), fail(InvalidRequest("image URLs unsupported")))
    executor = ResilientExecutor(inner)
    with pytest.raises(InvalidRequest):
        await executor.generate(REQUEST, Collector())
    assert executor.breaker.state == "closed"


async def test_unmapped_exceptions_count_as_upstream_failures(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(threshold=1, max_retries=2), fail(OSError("connection reset")))
    executor = ResilientExecutor(inner)
    with pytest.raises(OSError):
        await executor.generate(REQUEST, Collector())
    assert inner.calls == 1
    assert executor.breaker.state == "open"


async def test_failing_downstream_emit_is_not_an_upstream_failure(virtual_time: object) -> None:
    async def broken_client(event: Event) -> None:
        raise trio.BrokenResourceError

    inner = ScriptedExecutor(tier_config(threshold=1, max_retries=2), answer())
    executor = ResilientExecutor(inner)
    with pytest.raises(trio.BrokenResourceError):
        await executor.generate(REQUEST, broken_client)
    assert inner.calls == 1
    assert executor.breaker.state == "closed"


async def test_retries_and_timeouts_are_logged_with_the_upstream_name(
        virtual_time: object, caplog: pytest.LogCaptureFixture) -> None:
    secret_request = ChatRequest(messages=[Message("user", "my secret prompt")], model="m",
                                 passthrough_headers={"x-api-key": "sk-hidden"})
    inner = ScriptedExecutor(tier_config(max_retries=1), fail(server_error()), hang)
    with caplog.at_level(logging.WARNING, logger="daari.upstream"), pytest.raises(UpstreamTimeout):
        await ResilientExecutor(inner).generate(secret_request, Collector())
    text = caplog.text
    assert "upstream L4:scripted: attempt 1 failed (UpstreamError" in text
    assert "retry 1/1 in 0.25s" in text
    assert "upstream L4:scripted: first_byte timeout (10s)" in text
    assert "secret prompt" not in text and "sk-hidden" not in text


class RoomyEmit:
    """A `NowaitEmit` like the executor actor's (actors/executor.py): `nowait` delivers while the asker's buffer
    has room, else the awaited emit takes `delay` (a slow client draining it); `closed`: the asker has left."""

    def __init__(self, room: int, delay: float = 0.0, closed: bool = False) -> None:
        self.room = room
        self.delay = delay
        self.closed = closed
        self.events: list[Event] = []
        self.waited = 0  # emits that had to be awaited

    def nowait(self, event: Event) -> bool:
        if self.closed:
            raise trio.BrokenResourceError
        if self.room <= 0:
            return False
        self.room -= 1
        self.events.append(event)
        return True

    async def __call__(self, event: Event) -> None:
        self.waited += 1
        await trio.sleep(self.delay)
        self.events.append(event)


async def test_an_emit_with_room_is_not_awaited_and_the_idle_timeout_still_runs(virtual_time: object) -> None:
    out = RoomyEmit(room=100)
    start = trio.current_time()
    with pytest.raises(UpstreamTimeout) as info:
        await ResilientExecutor(ScriptedExecutor(tier_config(), emit_then(hang))).generate(REQUEST, out)
    assert "idle" in info.value.message
    assert trio.current_time() - start == pytest.approx(IDLE)  # re-armed by the delivered event, not suspended
    assert out.events == [TextDelta("partial")] and out.waited == 0


async def test_a_full_stream_whose_emit_waits_is_not_upstream_idle(virtual_time: object) -> None:
    async def gaps(emit: Emit) -> None:
        await emit(TextDelta("a"))
        await trio.sleep(IDLE * 0.8)
        await emit(TextDelta("b"))
        await emit(Finish("stop"))

    slow_client = RoomyEmit(room=1, delay=IDLE * 3)  # room for the first event, then each wait outlasts idle_s
    await ResilientExecutor(ScriptedExecutor(tier_config(), gaps)).generate(REQUEST, slow_client)
    assert assemble(slow_client.events).text == "ab" and slow_client.waited == 2


async def test_an_asker_gone_before_a_nowait_emit_is_a_downstream_failure(virtual_time: object) -> None:
    inner = ScriptedExecutor(tier_config(max_retries=2), answer("a b"))
    executor = ResilientExecutor(inner)
    with pytest.raises(trio.BrokenResourceError):
        await executor.generate(REQUEST, RoomyEmit(room=100, closed=True))
    assert inner.calls == 1  # not retried
    assert executor.status()["breaker"]["consecutive_failures"] == 0  # not the upstream's fault


@pytest.mark.parametrize("gap", [0.0, 0.0005, 0.002, IDLE * 0.9])
async def test_the_idle_deadline_runs_from_the_last_event(virtual_time: object, gap: float) -> None:
    async def two_then_hang(emit: Emit) -> None:
        await emit(TextDelta("a"))
        await trio.sleep(gap)
        await emit(TextDelta("b"))
        await trio.sleep_forever()

    start = trio.current_time()
    with pytest.raises(UpstreamTimeout, match="idle"):
        await ResilientExecutor(ScriptedExecutor(tier_config(), two_then_hang)).generate(REQUEST, RoomyEmit(100))
    # The watchdog looks when the first event's deadline comes, finds the second's later and waits for that one.
    assert trio.current_time() - start == IDLE + gap
