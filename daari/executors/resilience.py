"""Timeouts, retries and a circuit breaker around any executor, so upstream clients only speak their protocol.

`ResilientExecutor(inner)` is itself an `Executor`: the executor actor wraps every upstream executor in
one and never talks to the inner executor directly.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

from daari.config import RetryConfig
from daari.errors import DaariError, UpstreamError, UpstreamTimeout, UpstreamUnavailable
from daari.executors.base import Emit, Executor, Lease, Revoked
from daari.executors.breaker import CircuitBreaker
from daari.executors.lazy_deadlines import Watch, watchdog
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event, Finish, KeepAlive

log = logging.getLogger("daari.upstream")


@dataclass
class _Attempt:
    """What one attempt has done so far: decides whether a retry is still allowed."""

    emitted: bool = False
    finished: bool = False
    downstream_failed: bool = False  # the real emit raised: the client's side, not the upstream's


class ResilientExecutor(Executor):
    """Wraps `inner` with the timeouts, retries and breaker of `inner.config` (a TierConfig).

    Timeouts (per attempt, Trio cancel scopes around `inner.generate`, so the upstream stream is closed):
      - first_byte: attempt start -> the upstream's response headers. HTTP executors announce accepted
        headers with a `KeepAlive` event before reading the body (`http_upstream.response_started`), so a
        non-stream answer's body is not under this timeout.
      - idle: between two upstream events (headers included), so it also bounds a non-stream body. Time
        spent inside the downstream `emit` (a slow client) is not upstream idle time: the deadline is
        suspended while the real emit waits and runs again from its end (an emit that can deliver at once, a
        `NowaitEmit` with room, only notes the time). With an executor that marks its reads, a read's end is
        its flush's (the write to the client, suspended the same way). The idle timeout fires `idle_s` after
        the last event or write, exactly: no deadline moves per event (lazy_deadlines' watchdog looks only when
        one could have passed).
      - total: the whole attempt, downstream time included; it bounds how long one upstream call may live.
    Retries: never once the upstream may have started generating. Only `UpstreamError(retryable=True)`
    raised before any event is retried: connection failures before the request was sent, and 429 / 5xx /
    408 answered before any body. A first-byte timeout is not retried (the request was sent: a retry
    would pay for the answer again). Exponential backoff, or the error's `retry_after` (capped).
    `KeepAlive` events are the wrapper's business (liveness) and are not passed on.
    Breaker: checked before every attempt; each failed attempt counts as one failure (a request retried
    twice against a dead upstream counts three), so a dead upstream is detected in fewer requests. A
    completed answer (Finish emitted) is a success. Not counted either way: cancellation from outside
    (client disconnect), a failure of the downstream emit, errors that are not the upstream's fault
    (its 4xx other than 408/429, or a `DaariError` that is not an `UpstreamError`).
    """

    def __init__(self, inner: Executor, breaker: CircuitBreaker | None = None) -> None:
        super().__init__(inner.tier, inner.config)
        self.inner = inner
        self.kind = inner.kind
        self.supports_tools = inner.supports_tools
        self.flushes_per_read = inner.flushes_per_read
        self.breaker = breaker or CircuitBreaker(
            inner.config.breaker.failure_threshold, inner.config.breaker.cooldown_s)

    @property
    def name(self) -> str:
        return self.inner.name

    async def start(self, nursery: trio.Nursery) -> None:
        await self.inner.start(nursery)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def status(self) -> dict[str, Any]:
        return {**self.inner.status(), "breaker": self.breaker.snapshot()}

    def model_names(self) -> list[str]:
        return self.inner.model_names()

    def context_window(self) -> int | None:
        return self.inner.context_window()

    def listed_models(self) -> frozenset[str] | None:
        return self.inner.listed_models()

    async def list_models(self) -> list[str]:
        """The inner executor's live model list where it has one (Ollama's /api/tags), else model_names()."""
        lister = getattr(self.inner, "list_models", None)
        if lister is None:
            return self.model_names()
        return list(await lister())

    async def count_tokens(self, request: ChatRequest) -> bytes:
        """The inner executor's count_tokens under the first-byte timeout (the answer is small). Not retried
        and not counted by the breaker (it is not a generation), but refused while the circuit is open: the
        caller falls back to its estimate at once instead of waiting on a dead upstream."""
        if self.breaker.state == "open":
            raise UpstreamUnavailable(f"circuit open for {self.name}", upstream=self.name)
        with trio.move_on_after(self.config.timeouts.first_byte_s):
            return await self.inner.count_tokens(request)
        raise self._timeout("first_byte", self.config.timeouts.first_byte_s, retryable=False)

    async def forward(self, path: str, request: ChatRequest) -> tuple[int, bytes]:
        """The inner executor's forward (a compaction can take as long as a generation: the total timeout).
        Not retried (a compaction is not idempotent in cost), refused while the circuit is open."""
        if self.breaker.state == "open":
            raise UpstreamUnavailable(f"circuit open for {self.name}", upstream=self.name)
        with trio.move_on_after(self.config.timeouts.total_s):
            return await self.inner.forward(path, request)
        raise self._timeout("total", self.config.timeouts.total_s, retryable=False)

    async def generate(self, request: ChatRequest, emit: Emit, lease: Lease | None = None) -> None:
        """With a `lease` (`generate_leased`: a lent slot), each attempt's scope is the lease's too (`Lease.hold`),
        so the generation enters one cancel scope, not the actor's and this one's; a revoke that scope caught is
        `Revoked` (neither a timeout nor a failure), and the backoff between attempts waits under the lease."""
        retry = self.config.retry
        failures = 0
        last_error: Exception | None = None
        while True:
            if not self.breaker.allow():
                if last_error is not None:
                    # The circuit opened while this request was retrying: report what actually happened.
                    raise last_error
                raise UpstreamUnavailable(f"circuit open for {self.name}", upstream=self.name,
                                          retryable=False)
            attempt = _Attempt()
            settled = False
            try:
                await self._attempt(request, emit, attempt, lease)
                if not attempt.finished:
                    raise UpstreamError(f"{self.name}: upstream stream ended without a finish",
                                        upstream=self.name)
                self.breaker.record_success()
                settled = True
                return
            except Exception as exc:
                settled = True
                if attempt.downstream_failed or not _is_upstream_fault(exc):
                    self.breaker.release()
                else:
                    self.breaker.record_failure()
                if attempt.emitted or not _is_retryable(exc) or failures >= retry.max_retries:
                    raise
                delay = _retry_delay(exc, failures, self.config.retry)
                failures += 1
                last_error = exc
                log.warning("upstream %s: attempt %d failed (%s), retry %d/%d in %.2fs", self.name,
                            failures, _describe(exc), failures, retry.max_retries, delay)
            finally:
                if not settled:
                    # Cancelled from outside (client gone, shutdown): neither a success nor a failure.
                    self.breaker.release()
            if lease is None:
                await trio.sleep(delay)
            else:
                with lease.scoped():
                    await trio.sleep(delay)

    async def _attempt(self, request: ChatRequest, emit: Emit, attempt: _Attempt, lease: Lease | None) -> None:
        timeouts = self.config.timeouts
        start = trio.current_time()
        # One cancel scope, without a deadline of its own: the run's watchdog (lazy_deadlines) cancels it when the
        # total deadline or the gap one (first byte, then idle) passed, and which of the two is read off the clock
        # (`_expired`). An upstream read only notes when it ended (`Watch.last`): no deadline moves per read.
        total = start + timeouts.total_s
        scope = trio.CancelScope()
        watch = Watch(scope, start, total, timeouts.first_byte_s, timeouts.idle_s, trio.lowlevel.current_clock())
        downstream_flush = getattr(emit, "flush", None)
        inner_emit: Emit = (_TimedEmit(emit, attempt, watch) if downstream_flush is None
                            else _FlushingEmit(emit, attempt, watch, downstream_flush))
        if lease is not None:
            lease.hold(scope)  # a revoke cancels this scope: `revoked` tells it from a deadline
        dog = watchdog()
        dog.add(watch)
        try:
            with scope:
                await self.inner.generate(request, inner_emit)
        except Exception as exc:
            # An inner executor that turned our cancellation into its own error still timed out (a revoke's it
            # did not: that error goes on as it is, as it did past a scope of the actor's own).
            if not scope.cancel_called or (lease is not None and lease.revoked):
                raise
            raise self._expired(total, attempt) from exc
        finally:
            dog.remove(watch)
            if lease is not None:
                lease.drop(scope)
        if scope.cancelled_caught:
            if lease is not None and lease.revoked:
                raise Revoked
            raise self._expired(total, attempt)

    # Not a method that awaits `generate`: every coroutine frame between the executor's task and the upstream socket
    # is resumed at each wait on it (each upstream read of a stream).
    generate_leased = generate

    def _expired(self, total: float, attempt: _Attempt) -> UpstreamTimeout:
        """The deadline an attempt's scope passed: the total one once its time has come, else the gap's (first
        byte before any event, idle after)."""
        timeouts = self.config.timeouts
        if trio.current_time() >= total:
            return self._timeout("total", timeouts.total_s, retryable=False)
        if attempt.emitted:
            return self._timeout("idle", timeouts.idle_s, retryable=False)
        return self._timeout("first_byte", timeouts.first_byte_s, retryable=False)

    def _timeout(self, which: str, value: float, *, retryable: bool) -> UpstreamTimeout:
        log.warning("upstream %s: %s timeout (%gs)", self.name, which, value)
        return UpstreamTimeout(f"{self.name}: {which} timeout of {value:g}s exceeded", upstream=self.name,
                               retryable=retryable)


class _TimedEmit:
    """The wrapper's emit: marks the attempt (it emitted, it finished) and notes each event's time as the
    upstream's last activity. An event the downstream takes at once (a `NowaitEmit` with room: the executor's own
    read is the checkpoint) costs no wait; one whose delivery waits (a slow client) suspends the idle deadline while
    it waits (`Watch.busy`): the client's time is not the upstream's idle time. `KeepAlive` events are the
    wrapper's business (liveness) and are not passed on."""

    __slots__ = ("_attempt", "_emit", "_nowait", "_watch")

    def __init__(self, emit: Emit, attempt: _Attempt, watch: Watch) -> None:
        self._emit = emit
        self._attempt = attempt
        self._watch = watch
        # A `NowaitEmit` is told by its attribute: `isinstance` against a runtime-checkable Protocol costs ~11 us
        # on these cores (every attribute looked up through the typing machinery), once per attempt.
        self._nowait: Callable[[Event], bool] | None = getattr(emit, "nowait", None)

    async def __call__(self, event: Event) -> None:
        attempt = self._attempt
        attempt.emitted = True  # the upstream answered: it may be generating, no retry from here
        watch = self._watch
        if type(event) is not KeepAlive:
            nowait = self._nowait
            try:
                if nowait is None or not nowait(event):
                    await self._wait(event)
            except BaseException:
                attempt.downstream_failed = True  # the real emit raised: the client's side
                raise
            if type(event) is Finish:
                attempt.finished = True
        watch.limit = watch.idle
        watch.last = watch.clock.current_time()

    async def _wait(self, event: Event) -> None:
        watch = self._watch
        watch.busy = True  # the client's time is not the upstream's idle time
        await self._emit(event)
        watch.busy = False


class _FlushingEmit(_TimedEmit):
    """The wrapper's emit for an inner executor that marks its reads (`read_done` after each read's events, and a
    downstream that keeps events and writes them in `flush`: a `RelayEmit`). An event taken at once is only
    kept: the read's end is the flush's, which notes the time after its write (the write may wait on the client,
    so the idle deadline is suspended around it). A `KeepAlive` (the response's headers, or the upstream's own)
    is not followed by a flush: it notes its time itself. The first one (the upstream accepted the request) also
    lets a downstream with `prepare` (the live relay) get its first write ready while the upstream generates."""

    __slots__ = ("flush_downstream", "_prepare")

    def __init__(self, emit: Emit, attempt: _Attempt, watch: Watch, flush: Callable[[], Awaitable[None]]) -> None:
        super().__init__(emit, attempt, watch)
        self.flush_downstream = flush
        self._prepare: Callable[[], None] | None = getattr(emit, "prepare", None)

    async def __call__(self, event: Event) -> None:
        attempt = self._attempt
        attempt.emitted = True  # the upstream answered: it may be generating, no retry from here
        if type(event) is KeepAlive:
            watch = self._watch
            watch.limit = watch.idle
            watch.last = watch.clock.current_time()
            prepare = self._prepare
            if prepare is not None:
                self._prepare = None  # once an attempt: later keep-alives (pings, a role-only chunk) find it done
                prepare()
            return
        nowait = self._nowait
        try:
            if nowait is None or not nowait(event):
                await self._wait(event)
                watch = self._watch
                watch.limit = watch.idle
                watch.last = watch.clock.current_time()
        except BaseException:
            attempt.downstream_failed = True  # the real emit raised: the client's side
            raise
        if type(event) is Finish:
            attempt.finished = True

    def nowait(self, event: Event) -> bool:
        """`await self(event)` without a coroutine when the downstream takes the event at once (an executor's read
        loop asks this first, as of any `NowaitEmit`); False when it must be awaited: a `KeepAlive` (it notes the
        time), or a downstream that would wait."""
        nowait = self._nowait
        if nowait is None or type(event) is KeepAlive:
            return False
        attempt = self._attempt
        attempt.emitted = True  # the upstream answered: it may be generating, no retry from here
        try:
            if not nowait(event):
                return False
        except BaseException:
            attempt.downstream_failed = True  # the real emit raised: the client's side
            raise
        if type(event) is Finish:
            attempt.finished = True
        return True

    async def flush(self) -> None:
        """One upstream read's events go to the client: a write that may wait on the client, so the idle deadline
        is suspended around it; the upstream gets `idle_s` again from its end."""
        watch = self._watch
        watch.busy = True
        try:
            await self.flush_downstream()
        except BaseException:
            self._attempt.downstream_failed = True
            raise
        watch.busy = False
        watch.limit = watch.idle
        watch.last = watch.clock.current_time()


def _is_retryable(exc: Exception) -> bool:
    return isinstance(exc, UpstreamError) and exc.retryable


def _is_upstream_fault(exc: Exception) -> bool:
    """Whether a failed attempt says something about the upstream's health (counts for the breaker)."""
    if isinstance(exc, UpstreamError):
        status = exc.upstream_status
        # The upstream answered a request it did not like (unknown model, bad parameter): it is alive.
        return not (status is not None and 400 <= status < 500 and status not in (408, 429))
    # Another DaariError is raised by daari itself (a request this executor cannot express); anything
    # else escaped the executor's error mapping and most likely came from the connection.
    return not isinstance(exc, DaariError)


def _retry_delay(exc: Exception, failures: int, retry: RetryConfig) -> float:
    """Backoff before retry number `failures + 1`; the upstream's retry_after wins, within the cap."""
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        return max(0.0, min(float(retry_after), retry.retry_after_cap_s))
    return float(min(retry.backoff_initial_s * (2 ** failures), retry.backoff_max_s))


def _describe(exc: Exception) -> str:
    """For logs: our own messages never hold request content or secrets; foreign ones might."""
    if isinstance(exc, DaariError):
        return f"{type(exc).__name__}: {exc.message}"
    return type(exc).__name__
