"""CacheActor over a real SQLite file: memory in front, durable behind, survives a restart."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from actors.cache import CacheActor, L0Count, L0Get, L0Put
from actors.runtime import Health, Mailbox, RestartPolicy, supervise
from daari.cache.l0_memory import L0Memory
from daari.cache.l0_store import L0Entry
from daari.protocol.chat import Completion, ToolCall


def entry(text: str) -> L0Entry:
    return L0Entry(Completion(text=text, tool_calls=[ToolCall("c", "f", "{}")], finish_reason="tool_calls"),
                   tier="L3", agent_turn=True, semantic_ok=False, confidence=0.9)


async def start_cache(nursery: trio.Nursery, db: Path, memory: L0Memory) -> Mailbox:
    mailbox = Mailbox("cache", 8)
    await nursery.start(supervise, lambda: CacheActor(db, memory), mailbox, Health().status("cache"),
                        RestartPolicy())
    return mailbox


async def test_put_get_and_durable_across_instances(tmp_path: Path) -> None:
    db = tmp_path / "l0.sqlite"
    memory = L0Memory(1, 1 << 20)  # a 1-byte front keeps nothing once it is on disk
    async with trio.open_nursery() as nursery:
        cache = (await start_cache(nursery, db, memory)).address
        assert await cache.call(L0Get("k1")) is None
        await cache.call(L0Put("k1", entry("one")))
        await cache.call(L0Put("k2", entry("two")))
        with trio.fail_after(5):
            while memory.pending:  # the writer thread puts both on disk
                await trio.sleep(0.01)
        # Neither memory map holds k1 any more, so the answer below can only come from SQLite.
        assert memory.peek("k1") is None
        got = await cache.call(L0Get("k1"))
        assert got is not None
        assert got.completion.text == "one" and got.semantic_ok is False and got.agent_turn is True
        nursery.cancel_scope.cancel()
    # A new actor over the same file sees the entries (nothing held only in memory).
    async with trio.open_nursery() as nursery:
        cache = (await start_cache(nursery, db, L0Memory(1 << 20))).address
        assert await cache.call(L0Count()) == 2
        got = await cache.call(L0Get("k2"))
        assert got is not None and got.completion.tool_calls == [ToolCall("c", "f", "{}")]
        nursery.cancel_scope.cancel()


async def test_stopping_drains_acknowledged_puts_to_disk(tmp_path: Path) -> None:
    db = tmp_path / "l0.sqlite"
    async with trio.open_nursery() as nursery:
        cache = (await start_cache(nursery, db, L0Memory(1 << 20))).address
        for i in range(20):
            await cache.call(L0Put(f"k{i}", entry(str(i))))
        nursery.cancel_scope.cancel()  # at once: most writes are still queued
    async with trio.open_nursery() as nursery:
        cache = (await start_cache(nursery, db, L0Memory(1 << 20))).address
        assert await cache.call(L0Count()) == 20
        got = await cache.call(L0Get("k19"))
        assert got is not None and got.completion.text == "19"
        nursery.cancel_scope.cancel()


async def test_a_disk_read_does_not_wait_behind_a_write_in_progress(tmp_path: Path) -> None:
    """WAL lets a reader go on while a write holds the lock: an L0 miss in memory reads SQLite on its own
    connection, not behind the writer's batch (here stuck on a lock another process holds)."""
    import sqlite3

    db = tmp_path / "l0.sqlite"
    memory = L0Memory(1, 1 << 20)  # a 1-byte front keeps nothing once it is on disk
    async with trio.open_nursery() as nursery:
        cache = (await start_cache(nursery, db, memory)).address
        await cache.call(L0Put("on-disk", entry("one")))
        with trio.fail_after(5):
            while memory.pending:
                await trio.sleep(0.01)
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("begin immediate")  # another writer holds the lock: the actor's next batch waits on it
        try:
            await cache.call(L0Put("stuck", entry("two")))
            await trio.testing.wait_all_tasks_blocked()  # the writer task is waiting on its thread
            got = await cache.call(L0Get("on-disk"))
            assert got is not None and got.completion.text == "one"
            assert "stuck" in memory.pending  # answered while the write was still waiting for the lock
        finally:
            other.execute("rollback")
            other.close()
        with trio.fail_after(10):
            while memory.pending:  # the stuck write goes through once the lock is free
                await trio.sleep(0.01)
        assert await cache.call(L0Count()) == 2
        nursery.cancel_scope.cancel()
