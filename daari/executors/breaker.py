"""A circuit breaker: a small pure state machine (closed -> open -> half_open) with no I/O of its own.

`ResilientExecutor` asks `allow()` before each upstream attempt and reports how the attempt went; the
clock is injected so the whole cycle is testable without an event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import trio

BreakerState = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    """Opens after `failure_threshold` consecutive failures; after `cooldown_s` lets one probe through.

    closed: every attempt is allowed; failures are counted, a success resets the count.
    open: nothing is allowed until `cooldown_s` has passed since opening; the next `allow()` then moves to
    half_open and lets exactly one probe through.
    half_open: no attempt while the probe is out. The probe's success closes the circuit, its failure opens
    it again with a fresh cooldown, and `release()` (the probe was cancelled) frees the slot for another.
    """

    def __init__(self, failure_threshold: int, cooldown_s: float,
                 clock: Callable[[], float] = trio.current_time) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self.state: BreakerState = "closed"
        self.consecutive_failures = 0
        self.opened_at: float | None = None
        self._probe_out = False

    def allow(self) -> bool:
        """Whether an attempt may go upstream now. In half_open a True answer hands out the one probe."""
        if self.state == "closed":
            return True
        if self.state == "open":
            assert self.opened_at is not None
            if self._clock() - self.opened_at < self.cooldown_s:
                return False
            self.state = "half_open"
        if self._probe_out:
            return False
        self._probe_out = True
        return True

    def record_success(self) -> None:
        self.state = "closed"
        self.consecutive_failures = 0
        self.opened_at = None
        self._probe_out = False

    def record_failure(self) -> None:
        self.consecutive_failures += 1
        if self.state == "half_open":
            self._open()
        elif self.state == "closed" and self.consecutive_failures >= self.failure_threshold:
            self._open()
        # Already open: an attempt let through before the circuit opened failed late; the cooldown that
        # is running stays as it is.

    def release(self) -> None:
        """An attempt ended as neither success nor failure (cancelled by the client, a client-side error).

        Only matters in half_open: the probe slot is freed so the next request can probe.
        """
        if self.state == "half_open":
            self._probe_out = False

    def snapshot(self) -> dict[str, Any]:
        """For /healthz and metrics."""
        return {
            "state": self.state,
            "consecutive_failures": self.consecutive_failures,
            "opened_at": self.opened_at,
            "failure_threshold": self.failure_threshold,
            "cooldown_s": self.cooldown_s,
        }

    def _open(self) -> None:
        self.state = "open"
        self.opened_at = self._clock()
        self._probe_out = False
