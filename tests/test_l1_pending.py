"""Answers L1 stores before their embedding (actors/l1_pending.py): their context counts as held, lookups in it
wait for them, never longer than the bound; trio-native, with a mock clock where time matters."""

import trio
import trio.testing

from actors.l1_pending import PendingPuts


async def test_a_context_is_held_until_each_of_its_answers_is_done() -> None:
    pending = PendingPuts(limit=3)
    first, second = pending.add("ctx"), pending.add("ctx")
    assert first is not None and second is not None and pending.holds("ctx") and not pending.holds("other")
    pending.done("ctx", first)
    pending.done("ctx", first)  # twice: counted once
    assert pending.holds("ctx") and len(pending) == 1
    pending.done("ctx", second)
    assert not pending.holds("ctx") and len(pending) == 0 and first.is_set() and second.is_set()


async def test_past_the_limit_an_answer_is_not_taken() -> None:
    pending = PendingPuts(limit=2)
    assert pending.add("a") is not None and pending.add("b") is not None
    assert pending.add("c") is None and not pending.holds("c")


async def test_a_lookup_waits_for_its_contexts_answers_and_no_longer(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    pending = PendingPuts(limit=4)
    stored = pending.add("ctx")
    assert stored is not None
    waited: list[float] = []

    async def lookup() -> None:
        started = trio.current_time()
        await pending.wait("ctx", timeout_s=1.0)
        waited.append(trio.current_time() - started)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lookup)
        await trio.sleep(0.3)
        pending.done("ctx", stored)
    assert waited == [0.3]
    await pending.wait("ctx", timeout_s=1.0)  # nothing pending: no wait at all
    never = pending.add("ctx")  # an embedding that does not come back
    started = trio.current_time()
    await pending.wait("ctx", timeout_s=1.0)
    assert trio.current_time() - started == 1.0 and never is not None and not never.is_set()

