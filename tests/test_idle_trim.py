"""The idle trim task (daari/server/idle_trim.py): when it trims, that shutdown cancels it cleanly, and glibc's call."""

from __future__ import annotations

import platform

import pytest
import trio
import trio.testing

from daari.server.idle_trim import QUIET_CPU_SHARE, libc_malloc_trim, trim_when_idle

INTERVAL = 10.0


def scripted_cpu(busy: list[tuple[float, float]]) -> float:
    """CPU seconds used by now, half a core during each (start, end) of `busy`, nothing otherwise."""
    now = trio.current_time()
    return sum(0.5 * max(0.0, min(now, end) - start) for start, end in busy)


async def test_trims_once_per_quiet_period_after_activity(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    busy = [(0.0, 100.0), (300.0, 350.0)]
    trims: list[float] = []

    def trim() -> int:
        trims.append(trio.current_time())
        return 1

    with trio.move_on_after(500):
        await trim_when_idle(INTERVAL, trim, lambda: scripted_cpu(busy))
    # the first whole quiet interval after each busy spell, and never twice in one quiet spell
    assert trims == [110.0, 360.0]


async def test_a_little_cpu_is_still_quiet_and_more_is_busy(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    trims: list[float] = []
    rate = [QUIET_CPU_SHARE / 2]  # a core share, per second

    def trim() -> int:
        trims.append(trio.current_time())
        return 0

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trim_when_idle, INTERVAL, trim, lambda: rate[0] * trio.current_time())
        await trio.sleep(INTERVAL * 3 + 1)
        assert trims == [INTERVAL]  # start-up counts as activity: one trim, then quiet
        rate[0] = QUIET_CPU_SHARE * 2  # from here the CPU counter grows faster: busy
        await trio.sleep(INTERVAL * 3)
        assert trims == [INTERVAL]
        nursery.cancel_scope.cancel()


async def test_shutdown_cancels_it_mid_sleep_without_trimming(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    trims: list[float] = []

    def trim() -> int:
        trims.append(trio.current_time())
        return 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trim_when_idle, INTERVAL, trim, lambda: 100.0 * trio.current_time())  # always busy
        await trio.sleep(INTERVAL * 2.5)
        nursery.cancel_scope.cancel()
        cancelled_at = trio.current_time()
    # the nursery closed at the cancel, not at the task's next wake-up, and no trim ran
    assert trio.current_time() == cancelled_at
    assert trims == []


async def test_without_malloc_trim_it_returns_at_once(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    await trim_when_idle(INTERVAL, None)
    assert trio.current_time() == 0.0


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_malloc_trim_is_found_and_callable() -> None:
    trim = libc_malloc_trim()
    assert trim is not None
    garbage = [bytearray(4096) for _ in range(20_000)]  # ~80 MiB in small blocks, then freed
    del garbage
    assert trim() in (0, 1)
