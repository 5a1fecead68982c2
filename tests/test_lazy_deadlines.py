"""The resilience wrapper's deadlines kept by the run's watchdog (daari/executors/lazy_deadlines.py), on virtual
time: an idle upstream times out exactly `idle_s` after its last read's write (the same moment a deadline moved at
every read gave), a slow but steady one never does, the first-byte and total deadlines fire at their moments
whichever of `first_byte_s` and `idle_s` is the shorter, many attempts at once each fire at their own time, and
finished attempts do not pile up in the watchdog's heap."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from daari.config import TimeoutsConfig
from daari.errors import UpstreamTimeout
from daari.executors.base import Emit, read_done
from daari.executors.lazy_deadlines import PRUNE_SLACK, watchdog
from daari.executors.resilience import ResilientExecutor
from daari.protocol.events import Finish, KeepAlive, TextDelta
from tests.test_live_relay import ClientRelay, MarkingExecutor
from tests.test_resilience import IDLE, REQUEST, TOTAL, Collector, ScriptedExecutor, tier_config


@pytest.fixture
def virtual_time(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    mock_clock.autojump_threshold = 0
    return mock_clock


def steady(reads: int, gap: float, then_hang: bool = False):  # type: ignore[no-untyped-def]
    async def script(emit: Emit) -> None:
        await emit(KeepAlive())  # the response's headers
        for i in range(reads):
            await trio.sleep(gap)
            await emit(TextDelta(f"w{i} "))
            await read_done(emit)
        if then_hang:
            await trio.sleep_forever()
        await emit(Finish("stop"))
        await read_done(emit)
    return script


@pytest.mark.parametrize("gap", [IDLE * 0.5, IDLE * 0.999])
async def test_a_slow_but_steady_upstream_never_times_out(virtual_time: object, gap: float) -> None:
    client = ClientRelay()
    start = trio.current_time()
    await ResilientExecutor(MarkingExecutor(tier_config(), steady(18, gap))).generate(REQUEST, client)
    assert trio.current_time() - start == pytest.approx(18 * gap)  # 9-18 idle_s in all, never one gap of it
    assert len(client.events) == 19


@pytest.mark.parametrize("write", [0.0, IDLE * 0.3, IDLE * 2])
async def test_an_idle_upstream_times_out_idle_s_after_its_last_write(virtual_time: object, write: float) -> None:
    client = ClientRelay(delay=write)  # the client's time, which is not the upstream's
    start = trio.current_time()
    with pytest.raises(UpstreamTimeout, match="idle"):
        await ResilientExecutor(MarkingExecutor(tier_config(), steady(7, IDLE * 0.7, then_hang=True))).generate(
            REQUEST, client)
    assert trio.current_time() - start == pytest.approx(7 * (IDLE * 0.7 + write) + IDLE)


@pytest.mark.parametrize(("first_byte", "idle"), [(10.0, 5.0), (5.0, 10.0), (5.0, 5.0)])
async def test_first_byte_then_idle_whichever_is_shorter(virtual_time: object, first_byte: float,
                                                        idle: float) -> None:
    config = tier_config()
    config.timeouts = TimeoutsConfig(connect_s=1.0, first_byte_s=first_byte, idle_s=idle, total_s=TOTAL)

    async def never(emit: Emit) -> None:
        await trio.sleep_forever()

    start = trio.current_time()
    with pytest.raises(UpstreamTimeout, match="first_byte"):
        await ResilientExecutor(ScriptedExecutor(config, never)).generate(REQUEST, Collector())
    assert trio.current_time() - start == first_byte

    async def headers_late_then_silence(emit: Emit) -> None:
        await trio.sleep(first_byte * 0.9)
        await emit(KeepAlive())
        await trio.sleep_forever()

    start = trio.current_time()
    with pytest.raises(UpstreamTimeout, match="idle"):
        await ResilientExecutor(ScriptedExecutor(config, headers_late_then_silence)).generate(REQUEST, Collector())
    assert trio.current_time() - start == pytest.approx(first_byte * 0.9 + idle)


async def test_the_total_deadline_fires_on_time_during_a_steady_stream_and_a_waiting_write(
        virtual_time: object) -> None:
    start = trio.current_time()
    with pytest.raises(UpstreamTimeout, match="total"):
        await ResilientExecutor(MarkingExecutor(tier_config(), steady(10_000, IDLE * 0.5))).generate(
            REQUEST, ClientRelay())
    assert trio.current_time() - start == pytest.approx(TOTAL)

    start = trio.current_time()
    with pytest.raises(UpstreamTimeout, match="total"):
        await ResilientExecutor(MarkingExecutor(tier_config(), steady(10, 1.0))).generate(
            REQUEST, ClientRelay(delay=TOTAL * 2))  # the first write outlasts the total time
    assert trio.current_time() - start == pytest.approx(TOTAL)


async def test_many_attempts_at_once_each_time_out_at_their_own_moment(virtual_time: object) -> None:
    ended: dict[int, float] = {}
    start = trio.current_time()

    async def attempt(i: int) -> None:
        reads = i % 7
        gap = IDLE * (0.2 + 0.1 * (i % 5))
        script = steady(reads, gap, then_hang=i % 3 != 0)
        try:
            await ResilientExecutor(MarkingExecutor(tier_config(), script)).generate(REQUEST, ClientRelay())
        except UpstreamTimeout:
            ended[i] = trio.current_time() - start
        else:
            ended[i] = -(trio.current_time() - start)  # finished

    async with trio.open_nursery() as nursery:
        for i in range(60):
            nursery.start_soon(attempt, i)
    for i, at in ended.items():
        reads, gap = i % 7, IDLE * (0.2 + 0.1 * (i % 5))
        if i % 3 != 0:
            assert at == pytest.approx(reads * gap + IDLE), i
        else:
            assert at == pytest.approx(-reads * gap), i


async def test_finished_attempts_do_not_pile_up_in_the_watchdog(virtual_time: object) -> None:
    async def quick(emit: Emit) -> None:
        await emit(KeepAlive())
        await emit(TextDelta("a"))
        await emit(Finish("stop"))
        await read_done(emit)

    executor = ResilientExecutor(MarkingExecutor(tier_config(), quick))
    for _ in range(1_000):
        await executor.generate(REQUEST, ClientRelay())
    assert len(watchdog()._heap) <= PRUNE_SLACK + 1  # none live: 1,000 entries waiting 10 s each, pruned
