"""Bounded memory and disk for L0, through a running daari: the memory front in bytes, the SQLite store by
size (least recently used go) and age, no transaction per disk hit, a bounded queue of pending writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
import trio

from daari.cache.l0_memory import L0Memory
from daari.cache.l0_store import L0Entry, L0Store, entry_size
from daari.protocol.chat import Completion
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

PADDING = "lorem ipsum dolor " * 600  # ~10 KiB: the fake upstream's answer echoes the question


def chat(i: int) -> dict[str, object]:
    return {"model": "good", "messages": [{"role": "user", "content": f"question {i}: {PADDING}"}]}


def upstream_calls(fake: FakeOpenAI) -> int:
    return sum(1 for r in fake.requests if r.path == "/v1/chat/completions")


async def settle(server: object) -> None:
    """Until every acknowledged put is on disk."""
    memory = server.parts.l0_memory  # type: ignore[attr-defined]
    with trio.fail_after(30):  # generous: a busy CI machine, not a slow writer, is what takes long
        while memory.pending:
            await trio.sleep(0.005)


async def test_memory_front_is_bounded_in_bytes_and_disk_still_serves(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             cache={"l0": {"memory_mb": 0.05}})  # ~52 KiB: about four answers
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for i in range(12):
                assert (await client.post("/v1/chat/completions", json=chat(i))).status_code == 200
            memory = server.parts.l0_memory
            assert 0 < memory.lru.bytes <= 0.05 * 1024 * 1024
            assert len(memory.lru) < 12
            await settle(server)
            first = await client.post("/v1/chat/completions", json=chat(0))  # long gone from memory
    assert first.json()["daari_meta"]["cache"] == "hit"
    assert upstream_calls(fake) == 12


async def test_disk_store_evicts_least_recently_used_past_max_disk_mb(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             # ~100 KiB on disk; L1 off: it would serve the evicted (identical) prompt
                             cache={"l0": {"memory_mb": 0.01, "max_disk_mb": 0.1}, "l1": {"enabled": False}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for i in range(30):  # ~300 KiB of answers
                assert (await client.post("/v1/chat/completions", json=chat(i))).status_code == 200
                await settle(server)
            newest = await client.post("/v1/chat/completions", json=chat(29))
            oldest = await client.post("/v1/chat/completions", json=chat(0))
    with sqlite3.connect(Path(config.data_dir) / "l0.sqlite") as db:
        stored, size = db.execute("select count(*), sum(size) from l0").fetchone()
    assert size <= 0.1 * 1024 * 1024 and 0 < stored < 30
    assert newest.json()["daari_meta"]["cache"] == "hit"
    assert oldest.json()["daari_meta"]["cache"] == "miss"  # evicted: asked upstream again
    assert upstream_calls(fake) == 31


async def test_entries_older_than_ttl_are_not_served_and_are_swept(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             cache={"l0": {"ttl_s": 3600}, "l1": {"enabled": False}})  # L0's own ageing
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            await client.post("/v1/chat/completions", json=chat(1))
            await client.post("/v1/chat/completions", json=chat(2))
        db_path = Path(config.data_dir) / "l0.sqlite"
        with sqlite3.connect(db_path) as db:  # entry 1 was stored two hours ago
            db.execute("update l0 set created_at = created_at - 7200 where rowid = (select min(rowid) from l0)")
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            aged = await client.post("/v1/chat/completions", json=chat(1))
            fresh = await client.post("/v1/chat/completions", json=chat(2))
    assert aged.json()["daari_meta"]["cache"] == "miss" and fresh.json()["daari_meta"]["cache"] == "hit"
    assert upstream_calls(fake) == 3


async def test_a_disk_hit_commits_no_transaction(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             cache={"l0": {"memory_mb": 0.001}})  # nothing stays in memory: hits read disk
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            await client.post("/v1/chat/completions", json=chat(1))
            await settle(server)
            watcher = sqlite3.connect(Path(config.data_dir) / "l0.sqlite")
            before = watcher.execute("pragma data_version").fetchone()[0]
            for _ in range(5):
                hit = await client.post("/v1/chat/completions", json=chat(1))
                assert hit.json()["daari_meta"]["cache"] == "hit"
            after = watcher.execute("pragma data_version").fetchone()[0]
            # The hit tally is written with the next batch of puts: one transaction for all five.
            await client.post("/v1/chat/completions", json=chat(2))
            await settle(server)
            hits = watcher.execute("select hits from l0 order by rowid limit 1").fetchone()[0]
            watcher.close()
    assert after == before  # another connection's commit would have changed data_version
    assert hits == 5


def test_pending_writes_are_bounded_in_bytes() -> None:
    memory = L0Memory(max_bytes=1 << 20, max_pending_bytes=30_000)
    entry = L0Entry(Completion(text="x" * 10_000), tier="L3")
    size = entry_size(entry)
    for i in range(30_000 // size):
        assert memory.has_room(entry)
        memory.remember(f"k{i}", entry)
    assert not memory.has_room(entry)  # the CacheActor refuses the put: the request is served uncached
    memory.written("k0", entry)
    assert memory.has_room(entry) and memory.pending_bytes == size * (30_000 // size - 1)


def test_store_evicts_the_least_recently_used_and_a_failed_write_changes_nothing(tmp_path: Path) -> None:
    def entry(text: str) -> L0Entry:
        return L0Entry(Completion(text=text * 1000), tier="L3")

    size = entry_size(entry("a"))
    store = L0Store(tmp_path / "l0.sqlite", max_bytes=int(size * 2.5))
    store.write([("a", entry("a"))], {}, now=1.0)
    store.write([("b", entry("b"))], {}, now=2.0)
    store.write([], {"a": 1}, now=3.0)  # "a" was hit since: "b" is now the least recently used
    store.write([("c", entry("c"))], {}, now=4.0)
    assert store.get("b") is None and store.get("a") is not None and store.get("c") is not None
    before = store.total_bytes
    store.close()
    with sqlite3.connect(tmp_path / "l0.sqlite") as db:  # make the next write fail: a constraint it breaks
        db.execute("create trigger refuse before insert on l0 begin select raise(abort, 'disk says no'); end")
    store = L0Store(tmp_path / "l0.sqlite", max_bytes=int(size * 2.5))
    assert store.total_bytes == before
    with pytest.raises(sqlite3.IntegrityError):
        store.write([("d", entry("d"))], {"a": 1}, now=5.0)
    assert store.total_bytes == before and store.count() == 2
    store.close()
