"""Answers L1 stores before their embedding (actors/l1_pending.py, `L1EmbedAndPut`): their context counts as held,
lookups in it wait for them, never longer than the bound, and an actor that stops lets its waiters go;
trio-native, with a mock clock where time matters, the real model and SQLite store elsewhere."""

from pathlib import Path

import numpy as np
import trio
import trio.testing

from actors.embedder import Embed, EmbedderActor, EmbedderStatus
from actors.l1_pending import PendingPuts
from actors.runtime import Mailbox
from actors.semantic_cache import PENDING_WAIT_S, L1Count, L1EmbedAndPut, L1Lookup, L1MayHold, SemanticCacheActor
from daari.protocol.chat import Completion
from daari.semantic.minilm import DIMENSIONS


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



CONTEXT = "ab" * 32  # a lookup context is a hex digest


def unit_vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIMENSIONS).astype(np.float32)
    return v / np.linalg.norm(v)


async def test_an_answer_is_embedded_after_its_reply_and_found_by_the_next_lookup(tmp_path: Path) -> None:
    status = EmbedderStatus()
    embedder, l1 = Mailbox("embedder", 8), Mailbox("l1", 16)
    actor = SemanticCacheActor(tmp_path, max_entries=100, max_age_s=3600, trees=2, rebuild_after=1000,
                               embedder=embedder.address)
    async with trio.open_nursery() as nursery:
        await nursery.start(EmbedderActor(status).serve_inbox, embedder.inbox)
        await nursery.start(actor.serve_inbox, l1.inbox)
        with trio.fail_after(60):
            await status.started.wait()
        assert not await l1.address.call(L1MayHold(CONTEXT))
        assert l1.address.tell(L1EmbedAndPut(CONTEXT, "user: how do I list docker containers?", Completion(text="a"),
                                             "L3"))
        assert await l1.address.call(L1MayHold(CONTEXT))  # at once: the answer is counted before it is stored
        vector = (await embedder.address.call(Embed("user: how do I list docker containers?"))).vector
        found = await l1.address.call(L1Lookup(vector, CONTEXT, 0.99))  # waits for the pending put
        assert [m.entry.completion.text for m in found] == ["a"] and len(actor.pending) == 0
        assert status.texts == 2 and await l1.address.call(L1Count()) == 1
        nursery.cancel_scope.cancel()


async def test_a_lookup_waits_at_most_the_bound_for_an_embedding_that_never_comes(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    silent, l1 = Mailbox("embedder", 8), Mailbox("l1", 16)  # nobody serves the embedder: it never answers
    actor = SemanticCacheActor(tmp_path, max_entries=100, max_age_s=3600, trees=2, rebuild_after=1000,
                               embedder=silent.address)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.serve_inbox, l1.inbox)
        assert await l1.address.call(L1EmbedAndPut(CONTEXT, "user: q", Completion(text="a"), "L3"))
        started = trio.current_time()
        assert await l1.address.call(L1Lookup(unit_vector(1), CONTEXT, 0.5)) == []
        assert trio.current_time() - started == PENDING_WAIT_S
        assert len(actor.pending) == 1
        nursery.cancel_scope.cancel()
    assert len(actor.pending) == 0  # the actor stopped: the answer still waiting was dropped, its waiters let go


async def test_without_an_embedder_such_an_answer_is_not_taken(tmp_path: Path) -> None:
    l1 = Mailbox("l1", 16)
    async with trio.open_nursery() as nursery:
        await nursery.start(SemanticCacheActor(tmp_path, max_entries=100, max_age_s=3600, trees=2,
                                               rebuild_after=1000).serve_inbox, l1.inbox)
        assert not await l1.address.call(L1EmbedAndPut(CONTEXT, "user: q", Completion(text="a"), "L3"))
        assert not await l1.address.call(L1MayHold(CONTEXT))
        nursery.cancel_scope.cancel()


async def test_an_embedder_that_is_down_leaves_the_answer_unstored_and_l1_running(tmp_path: Path) -> None:
    down, l1 = Mailbox("embedder", 8), Mailbox("l1", 16)
    down.close_and_fail_queued("stopped")
    actor = SemanticCacheActor(tmp_path, max_entries=100, max_age_s=3600, trees=2, rebuild_after=1000,
                               embedder=down.address)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.serve_inbox, l1.inbox)
        assert await l1.address.call(L1EmbedAndPut(CONTEXT, "user: q", Completion(text="a"), "L3"))
        assert await l1.address.call(L1Lookup(unit_vector(1), CONTEXT, 0.5)) == []  # not held up: nothing pending
        assert len(actor.pending) == 0 and await l1.address.call(L1Count()) == 0
        assert not await l1.address.call(L1MayHold(CONTEXT))
        nursery.cancel_scope.cancel()
