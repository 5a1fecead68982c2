"""CacheActor over a real SQLite file: LRU in front, durable behind, survives a restart."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from actors import Health, RestartPolicy, open_mailbox, supervise
from actors.cache_actor import CacheActor, L0Count, L0Get, L0Put
from daari.cache.l0_memory import L0Memory
from daari.cache.l0_store import L0Entry
from daari.protocol.chat import Completion, ToolCall


def entry(text: str) -> L0Entry:
    return L0Entry(Completion(text=text, tool_calls=[ToolCall("c", "f", "{}")], finish_reason="tool_calls"),
                   tier="L3", agent_turn=True, semantic_ok=False, confidence=0.9)


async def test_put_get_and_durable_across_instances(tmp_path: Path) -> None:
    db = tmp_path / "l0.sqlite"
    async with trio.open_nursery() as nursery:
        cache, inbox = open_mailbox("cache", 8)
        await nursery.start(supervise, lambda: CacheActor(db, L0Memory(1, 1 << 20)), inbox, Health(), RestartPolicy())
        assert await cache.ask(L0Get("k1")) is None
        await cache.ask(L0Put("k1", entry("one")))
        await cache.ask(L0Put("k2", entry("two")))  # a 1-byte LRU keeps nothing
        got = await cache.ask(L0Get("k1"))  # so this one comes from SQLite
        assert got.completion.text == "one" and got.semantic_ok is False and got.agent_turn is True
        nursery.cancel_scope.cancel()  # stopping drains the queued disk writes
    # A new actor over the same file sees the entries (nothing held only in memory).
    async with trio.open_nursery() as nursery:
        cache, inbox = open_mailbox("cache", 8)
        await nursery.start(supervise, lambda: CacheActor(db, L0Memory(1 << 20)), inbox, Health(), RestartPolicy())
        assert await cache.ask(L0Count()) == 2
        got = await cache.ask(L0Get("k2"))
        assert got.completion.tool_calls == [ToolCall("c", "f", "{}")]
        nursery.cancel_scope.cancel()
