"""CircuitBreaker: the closed -> open -> half_open cycle, on a fake clock and once under Trio's MockClock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from daari.executors.breaker import CircuitBreaker


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def opened(clock: FakeClock, threshold: int = 3, cooldown: float = 30.0) -> CircuitBreaker:
    breaker = CircuitBreaker(threshold, cooldown, clock=clock)
    for _ in range(threshold):
        assert breaker.allow()
        breaker.record_failure()
    return breaker


def test_closed_counts_failures_and_opens_at_threshold() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(3, 30.0, clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state == "closed"
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state == "open"
    assert breaker.snapshot() == {"state": "open", "consecutive_failures": 3, "opened_at": 100.0,
                                  "failure_threshold": 3, "cooldown_s": 30.0}


def test_success_resets_the_failure_count() -> None:
    breaker = CircuitBreaker(3, 30.0, clock=FakeClock())
    breaker.record_failure()
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state == "closed"
    assert breaker.consecutive_failures == 2


def test_open_rejects_until_cooldown_then_lets_exactly_one_probe() -> None:
    clock = FakeClock()
    breaker = opened(clock)
    clock.now += 29.9
    assert not breaker.allow()
    assert breaker.state == "open"
    clock.now += 0.1
    assert breaker.allow()
    assert breaker.state == "half_open"
    assert not breaker.allow()  # the probe is out
    assert not breaker.allow()


def test_probe_success_closes() -> None:
    clock = FakeClock()
    breaker = opened(clock)
    clock.now += 30
    assert breaker.allow()
    breaker.record_success()
    assert breaker.snapshot()["state"] == "closed"
    assert breaker.consecutive_failures == 0
    assert breaker.opened_at is None
    assert breaker.allow() and breaker.allow()


def test_probe_failure_reopens_with_a_new_cooldown() -> None:
    clock = FakeClock()
    breaker = opened(clock)
    clock.now += 30
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state == "open"
    assert breaker.opened_at == 130.0
    clock.now += 29
    assert not breaker.allow()
    clock.now += 1
    assert breaker.allow()


def test_released_probe_lets_the_next_request_probe() -> None:
    clock = FakeClock()
    breaker = opened(clock)
    clock.now += 30
    assert breaker.allow()
    breaker.release()  # the probe was cancelled: no verdict
    assert breaker.state == "half_open"
    assert breaker.allow()
    assert not breaker.allow()


def test_release_while_closed_changes_nothing() -> None:
    breaker = CircuitBreaker(2, 1.0, clock=FakeClock())
    breaker.record_failure()
    breaker.release()
    assert breaker.snapshot()["consecutive_failures"] == 1
    assert breaker.state == "closed"


def test_late_failure_while_open_keeps_the_running_cooldown() -> None:
    clock = FakeClock()
    breaker = opened(clock)
    clock.now += 10
    breaker.record_failure()  # an attempt let through before the circuit opened
    assert breaker.opened_at == 100.0
    clock.now += 20
    assert breaker.allow()


def test_threshold_below_one_is_rejected() -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(0, 1.0)


async def test_full_cycle_under_trio_mock_clock(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    breaker = CircuitBreaker(2, 5.0)  # default clock: trio.current_time
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state == "open"
    opened_at = breaker.opened_at
    assert opened_at == trio.current_time()
    await trio.sleep(4.9)
    assert not breaker.allow()
    await trio.sleep(0.1)
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.opened_at == pytest.approx(opened_at + 5.0)
    await trio.sleep(5.0)
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state == "closed"
