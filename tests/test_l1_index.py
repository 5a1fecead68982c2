"""The L1 vector index (annoy + exact buffer, swap on rebuild) and the L1 store (SQLite, eviction)."""

import errno
import threading
from pathlib import Path

import numpy as np
import pytest

from daari.cache.l1_store import L1Store, context_id
from daari.protocol.chat import Completion
from daari.semantic.index import Snapshot, VectorIndex, load_sealed, rebuild
from daari.semantic.minilm import DIMENSIONS


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIMENSIONS).astype(np.float32)
    return v / np.linalg.norm(v)


def near(v: np.ndarray, seed: int, noise: float = 0.1) -> np.ndarray:
    w = v + noise * unit(seed)
    return (w / np.linalg.norm(w)).astype(np.float32)


def test_buffer_is_searched_exactly_within_the_context() -> None:
    index = VectorIndex()
    v = unit(1)
    index.add(10, 1, v)
    index.add(11, 2, v)  # same vector, other context
    index.add(12, 1, unit(2))  # other direction
    found = index.search(near(v, 3), 1, threshold=0.8, limit=3)
    assert [c.row_id for c in found] == [10]
    assert found[0].similarity > 0.9


def test_rebuild_swaps_in_an_index_and_keeps_later_entries_buffered(tmp_path: Path) -> None:
    index = VectorIndex()
    vectors = [unit(i) for i in range(50)]
    for i, v in enumerate(vectors):
        index.add(i, 7, v)
    snapshot = index.snapshot()
    index.add(100, 7, unit(100))  # arrives while the rebuild runs
    index.delete([3])  # evicted while the rebuild runs
    sealed = rebuild(snapshot, trees=4, path=tmp_path / "l1.index")
    index.swap(sealed, snapshot.covered)
    assert index.buffered == 1 and len(sealed.row_ids) == 50
    assert [c.row_id for c in index.search(vectors[5], 7, 0.99, 1)] == [5]  # from annoy
    assert [c.row_id for c in index.search(unit(100), 7, 0.99, 1)] == [100]  # from the buffer
    assert index.search(vectors[3], 7, 0.99, 1) == []  # deleted
    assert len(index) == 50
    loaded = load_sealed(tmp_path / "l1.index")
    assert loaded is not None and loaded.row_ids.tolist() == list(range(50))
    # The next rebuild leaves the deleted entry out.
    again = rebuild(index.snapshot(), trees=4)
    assert 3 not in again.row_ids.tolist() and 100 in again.row_ids.tolist()


def test_the_census_counts_live_entries_by_context_through_deletes_and_rebuilds(tmp_path: Path) -> None:
    index = VectorIndex()
    for row_id, context in ((1, 7), (2, 7), (3, 8)):
        index.add(row_id, context, unit(row_id))
    census = index.census
    assert census.may_hold(7) and census.may_hold(8) and not census.may_hold(9)
    snapshot = index.snapshot()
    index.delete([3, 3])  # while a rebuild runs; twice in one call
    index.delete([3])  # and again later: counted once
    assert not census.may_hold(8) and len(census) == 1
    index.swap(rebuild(snapshot, trees=2, path=tmp_path / "l1.index"), snapshot.covered)
    assert index.census is census and census.may_hold(7) and not census.may_hold(8)
    index.delete([1])  # from the sealed index
    assert census.may_hold(7)  # row 2 is left
    index.delete([2, 99])  # 99 was never indexed
    assert not census.may_hold(7) and len(census) == 0
    reloaded = VectorIndex(load_sealed(tmp_path / "l1.index"))  # a saved index counts its entries at load
    assert reloaded.census.may_hold(7) and reloaded.census.may_hold(8)


def test_annoy_similarity_is_cosine() -> None:
    index = VectorIndex()
    a, b = unit(1), near(unit(1), 2, noise=0.5)
    index.add(1, 0, a)
    index.swap(rebuild(index.snapshot(), trees=2), 1)
    (candidate,) = index.search(b, 0, 0.0, 1)
    assert abs(candidate.similarity - float(a @ b)) < 1e-3


def test_missing_or_broken_saved_index_is_none(tmp_path: Path) -> None:
    assert load_sealed(tmp_path / "none.index") is None
    (tmp_path / "bad.index").write_text('{"generation": "g1", "items": 3}')
    (tmp_path / "bad.g1.annoy").write_bytes(b"not an index")
    (tmp_path / "bad.g1.ids.npz").write_bytes(b"nor ids")
    assert load_sealed(tmp_path / "bad.index") is None
    (tmp_path / "worse.index").write_bytes(b"\x00 not a manifest")
    assert load_sealed(tmp_path / "worse.index") is None


def test_a_save_replaces_the_files_an_older_daari_wrote(tmp_path: Path) -> None:
    for old in ("l1.annoy", "l1.ids.npz", "l1.tmp"):
        (tmp_path / old).write_bytes(b"from before generations")
    rebuild(snapshot_of([1, 2, 3]), trees=2, path=tmp_path / "l1.index")
    assert_whole(tmp_path / "l1.index", [[1, 2, 3]])
    assert not any((tmp_path / old).exists() for old in ("l1.annoy", "l1.ids.npz", "l1.tmp"))


def test_store_round_trip_and_eviction_by_count_and_age(tmp_path: Path) -> None:
    store = L1Store(tmp_path / "l1.sqlite")
    context = "ab" * 32
    ids = [store.put(context, f"user: q{i}", unit(i), Completion(text=f"a{i}"), "L3") for i in range(5)]
    entry = store.get(ids[0])
    assert entry is not None and entry.completion.text == "a0" and entry.embed_text == "user: q0"
    stored = store.vectors()
    assert stored.row_ids.tolist() == ids and stored.contexts.tolist() == [context_id(context)] * 5
    assert np.allclose(stored.vectors[2], unit(2))
    assert store.evict(max_entries=3, max_age_s=3600) == ids[:2]  # the oldest past the size
    assert store.evict(max_entries=10, max_age_s=60, now=entry.created_at + 120) == ids[2:]  # too old
    assert store.count() == 0
    store.close()


async def test_actor_loads_the_saved_index_and_buffers_what_came_after(tmp_path: Path) -> None:
    import trio

    from actors.runtime import Mailbox
    from actors.semantic_cache import IndexStats, L1Count, L1Lookup, L1MayHold, L1Put, L1Rebuild, SemanticCacheActor

    context = "cd" * 32

    async def run_actor(stats: IndexStats, body):  # type: ignore[no-untyped-def]
        mailbox = Mailbox("l1", 16)
        actor = SemanticCacheActor(tmp_path, max_entries=100, max_age_s=3600, trees=2, rebuild_after=1000,
                                   stats=stats)
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.serve_inbox, mailbox.inbox)
            await body(mailbox.address)
            nursery.cancel_scope.cancel()

    async def first(address) -> None:  # type: ignore[no-untyped-def]
        for i in range(3):
            await address.call(L1Put(context, f"user: q{i}", unit(i), Completion(text=f"a{i}"), "L3"))
        await address.call(L1Rebuild())  # saved with 3 entries
        for i in range(3, 5):
            await address.call(L1Put(context, f"user: q{i}", unit(i), Completion(text=f"a{i}"), "L3"))

    await run_actor(IndexStats(), first)
    assert (tmp_path / "l1.index").exists()
    stats = IndexStats()

    async def second(address) -> None:  # type: ignore[no-untyped-def]
        assert await address.call(L1Count()) == 5
        assert await address.call(L1MayHold(context)) and not await address.call(L1MayHold("ef" * 32))
        matches = await address.call(L1Lookup(unit(4), context, 0.99))
        assert [m.entry.completion.text for m in matches] == ["a4"]  # a buffered entry, found exactly
        assert (await address.call(L1Lookup(unit(1), "ef" * 32, 0.5))) == []  # another context: nothing
        with trio.fail_after(10):
            while stats.rebuilds < 1:  # the two newer entries are folded into a new index in the background
                await trio.sleep(0.01)
        assert stats.buffered == 0 and stats.entries == 5

    await run_actor(stats, second)


def snapshot_of(row_ids: list[int]) -> Snapshot:
    index = VectorIndex()
    for row_id in row_ids:
        index.add(row_id, 7, unit(row_id))
    return index.snapshot()


def assert_whole(path: Path, row_id_sets: list[list[int]]) -> None:
    """What is on disk loads, is one of the builds entire, and each item is that row's own vector."""
    loaded = load_sealed(path)
    assert loaded is not None and loaded.annoy is not None
    assert loaded.row_ids.tolist() in row_id_sets
    for item, row_id in enumerate(loaded.row_ids.tolist()):
        assert np.allclose(loaded.annoy.get_item_vector(item), unit(row_id), atol=1e-6)


def test_a_save_that_fails_midway_leaves_the_previous_index_whole(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "l1.index"
    rebuild(snapshot_of(list(range(10))), trees=2, path=path)
    files_before = sorted(p.name for p in tmp_path.iterdir())

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", disk_full)
    with pytest.raises(OSError):
        rebuild(snapshot_of(list(range(100, 110))), trees=2, path=path)
    monkeypatch.undo()
    assert_whole(path, [list(range(10))])
    assert sorted(p.name for p in tmp_path.iterdir()) == files_before  # nothing half-written left behind


def test_concurrent_rebuilds_leave_one_whole_index(tmp_path: Path) -> None:
    """An actor that stopped abandons its rebuild thread, which runs on while the next actor rebuilds: one at
    a time, and what is left on disk is one build entire, with no files of the others."""
    path = tmp_path / "l1.index"
    builds = [list(range(start, start + 300)) for start in (0, 1000, 2000, 3000)]
    threads = [threading.Thread(target=rebuild, args=(snapshot_of(rows), 2, path)) for rows in builds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert_whole(path, builds)
    assert len(list(tmp_path.glob("*.annoy"))) == 1 and len(list(tmp_path.glob("*.npz"))) == 1
