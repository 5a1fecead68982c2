"""The Redis stores against a real redis-server: L0 puts that race, L1 puts, the stream, eviction, and the link
going down and coming back."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
import trio

from daari.cache.l0_redis import RedisL0
from daari.cache.l0_store import L0Entry
from daari.cache.l1_redis import RedisL1
from daari.cache.redis_link import LinkSettings, RedisLink
from daari.cache.store import NewL1Entry, StoreUnavailable
from daari.protocol.chat import Completion
from daari.semantic.minilm import DIMENSIONS
from tests.redis_server import RedisServer, needs_redis

pytestmark = needs_redis

CONTEXT = hashlib.sha256(b"one lookup context").hexdigest()


def entry(text: str) -> L0Entry:
    return L0Entry(completion=Completion(text=text, finish_reason="stop", model="m"), tier="L3", task_type="qa")


def unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=DIMENSIONS).astype(np.float32)
    return vector / np.linalg.norm(vector)


@asynccontextmanager
async def link_to(server: RedisServer, **settings: float) -> AsyncIterator[RedisLink]:
    # Generous unless a test is about timeouts: this machine's cores are shared with other test runs.
    link = RedisLink(LinkSettings(server.url, **{"timeout_s": 2.0, **settings}))  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        async def run() -> None:
            async with link.running():
                await trio.sleep_forever()

        nursery.start_soon(run)
        with trio.fail_after(10):
            await link.wait_up()
        yield link
        nursery.cancel_scope.cancel()


async def test_an_l0_entry_round_trips_and_expires_with_its_ttl(redis: RedisServer) -> None:
    async with link_to(redis) as link:
        store = RedisL0(link, "t1:", ttl_s=3600)
        assert await store.get("k") is None
        assert await store.write([("k", entry("forty-two"))], {}) == {}
        got = await store.get("k")
        assert got is not None and got.completion.text == "forty-two" and got.task_type == "qa"
        assert await store.count() == 1
    ttl = int(redis.cli("PTTL", "t1:l0:k"))
    assert 3_500_000 < ttl <= 3_600_000


async def test_concurrent_l0_puts_of_one_key_keep_the_first_and_tell_the_second(redis: RedisServer) -> None:
    """Two daari (two links, two connections) store the same key at once: one entry stays, whole, and the one
    that lost learns which (no clobbering, no mix of the two)."""
    async with link_to(redis) as one, link_to(redis) as two:
        stores = [RedisL0(one, "race:"), RedisL0(two, "race:")]
        kept: list[dict[str, L0Entry]] = [{}, {}]
        for round_ in range(20):
            key = f"k{round_}"

            async def put(i: int, key: str = key) -> None:
                kept[i] = await stores[i].write([(key, entry(f"answer {i} of {key}"))], {})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(put, 0)
                nursery.start_soon(put, 1)
            stored = await stores[0].get(key)
            assert stored is not None
            winner = stored.completion.text
            assert winner in (f"answer 0 of {key}", f"answer 1 of {key}")
            losers = [i for i in (0, 1) if key in kept[i]]
            assert len(losers) == 1  # exactly one put lost, and it was told the entry that stays
            assert kept[losers[0]][key].completion.text == winner
            assert winner == f"answer {1 - losers[0]} of {key}"


async def test_l1_puts_dedupe_the_same_prompt_and_the_stream_carries_every_entry(redis: RedisServer) -> None:
    async with link_to(redis) as one, link_to(redis) as two:
        a = RedisL1(one, "p:", max_entries=100, max_age_s=3600)
        b = RedisL1(two, "p:", max_entries=100, max_age_s=3600)
        answer = Completion(text="use docker ps", finish_reason="stop")
        ids = []

        async def put(store: RedisL1) -> None:
            ids.append(await store.put(NewL1Entry(CONTEXT, "list containers", unit(1), answer, "L3")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(put, a)
            nursery.start_soon(put, b)
        assert ids[0] == ids[1]  # one entry for one prompt in one context, whoever put it
        other = await b.put(NewL1Entry(CONTEXT, "list images", unit(2), answer, "L4", "qa", 0.9))
        assert await a.count() == 2
        rows = (await a.vectors()).rows
        assert rows.row_ids.tolist() == [ids[0], other]
        assert np.allclose(rows.vectors[1], unit(2))
        found = await b.get_many([ids[0], other, 12345])
        assert set(found) == {ids[0], other}
        assert found[other].embed_text == "list images" and found[other].tier == "L4"
        assert found[other].confidence == 0.9 and found[other].completion.text == "use docker ps"


async def test_a_demoted_l1_entry_is_gone_for_every_daari_and_its_prompt_can_be_stored_anew(
        redis: RedisServer) -> None:
    """A shadow sample that disagreed demotes the entry: no daari on the Redis serves it again."""
    async with link_to(redis) as one, link_to(redis) as two:
        a = RedisL1(one, "p:", max_entries=100, max_age_s=3600)
        b = RedisL1(two, "p:", max_entries=100, max_age_s=3600)
        wrong = await a.put(NewL1Entry(CONTEXT, "list containers", unit(1), Completion(text="ls", finish_reason="stop"),
                                       "L3"))
        kept = await a.put(NewL1Entry(CONTEXT, "list images", unit(2), Completion(text="docker images"), "L3"))
        assert await b.demote(wrong) is True
        assert await a.demote(wrong) is False  # already gone
        assert set(await a.get_many([wrong, kept])) == {kept}
        fresh = await b.put(NewL1Entry(CONTEXT, "list containers", unit(1),
                                       Completion(text="docker ps", finish_reason="stop"), "L4"))
        assert fresh != wrong and (await a.get_many([fresh]))[fresh].completion.text == "docker ps"


async def test_a_follower_sees_entries_other_daari_store_after_it_started(redis: RedisServer) -> None:
    async with link_to(redis) as one, link_to(redis) as two:
        writer = RedisL1(one, "f:", max_entries=100, max_age_s=3600)
        reader = RedisL1(two, "f:", max_entries=100, max_age_s=3600)
        first = await writer.put(NewL1Entry(CONTEXT, "before", unit(3), Completion(text="x"), "L3"))
        seen: list[int] = []
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                async def follow() -> None:
                    async for rows in reader.follow(""):
                        seen.extend(rows.rows.row_ids.tolist())

                nursery.start_soon(follow)
                while not seen:
                    await trio.sleep(0.01)
                # The follower may read the new record before the writer has its reply: it only collects, and the
                # walk ends here, once both the put returned and the follower saw two records.
                second = await writer.put(NewL1Entry(CONTEXT, "after", unit(4), Completion(text="y"), "L3"))
                while len(seen) < 2:
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
    assert seen == [first, second]


async def test_l1_eviction_by_count_and_age_drops_entries_and_reports_the_oldest_left(redis: RedisServer) -> None:
    async with link_to(redis) as link:
        store = RedisL1(link, "e:", max_entries=3, max_age_s=3600)
        ids = [await store.put(NewL1Entry(CONTEXT, f"prompt {i}", unit(i), Completion(text=str(i)), "L3"))
               for i in range(5)]
        assert await store.count() == 3  # the put trims past max_entries
        assert set(await store.get_many(ids)) == set(ids[2:])
        evicted = await store.evict(3, 3600)
        assert evicted.below == ids[2]
        # The same prompt again after its entry was evicted is a new entry (its dedupe key went with it).
        again = await store.put(NewL1Entry(CONTEXT, "prompt 0", unit(0), Completion(text="0"), "L3"))
        assert again > ids[-1]
        everything = await store.evict(3, 0.0)  # max age 0: all of them are too old
        assert everything.below == -1 and await store.count() == 0
        assert redis.cli("KEYS", "e:l1:e:*") == "" and redis.cli("KEYS", "e:l1:d:*") == ""


async def test_a_link_fails_fast_while_redis_is_down_and_comes_back_when_it_returns(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "r")
    server.start()
    try:
        async with link_to(server, timeout_s=0.5, reconnect_initial_s=0.05, reconnect_max_s=0.2) as link:
            store = RedisL0(link, "d:")
            await store.write([("k", entry("kept"))], {})
            server.stop()
            with pytest.raises(StoreUnavailable):
                await store.get("k")
            assert link.state == "down" and store.unavailable() is not None
            with trio.fail_after(1):  # down: refused at once, no connection attempt, no timeout to wait for
                with pytest.raises(StoreUnavailable, match="is down"):
                    await store.get("k")
            server.start()
            with trio.fail_after(20):
                await link.wait_up()
            assert link.reconnects == 1 and await store.get("k") is None  # a restarted Redis lost its data
            server.pause()  # a Redis that does not answer: the command times out, the link goes down
            try:
                with trio.fail_after(5), pytest.raises(StoreUnavailable, match="timed out"):
                    await store.get("k")
                assert link.state == "down"
            finally:
                server.resume()
            with trio.fail_after(20):
                await link.wait_up()
            assert link.health()["state"] == "up" and link.health()["reconnects"] == 2
    finally:
        server.stop()


async def test_after_redis_restarts_empty_ids_stay_new_and_a_follower_picks_the_stream_up_again(
        tmp_path: Path) -> None:
    """A Redis that restarts without persistence loses the id counter and the stream: the next id is still above
    every id handed out before (an index may still hold those), and a follower that was reading the old stream
    delivers the entries stored after the restart."""
    server = RedisServer(tmp_path / "r")
    server.start()
    try:
        async with link_to(server, reconnect_initial_s=0.05, reconnect_max_s=0.2) as one, \
                link_to(server, reconnect_initial_s=0.05, reconnect_max_s=0.2) as two:
            writer = RedisL1(one, "x:", max_entries=100, max_age_s=3600)
            reader = RedisL1(two, "x:", max_entries=100, max_age_s=3600)
            before = await writer.put(NewL1Entry(CONTEXT, "before", unit(5), Completion(text="a"), "L3"))
            seen: list[int] = []
            after: list[int] = []
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    async def follow() -> None:  # collects only: it may see the record before the put returns
                        async for rows in reader.follow(""):
                            seen.extend(rows.rows.row_ids.tolist())

                    nursery.start_soon(follow)
                    while not seen:
                        await trio.sleep(0.01)
                    server.stop()
                    server.start()
                    while True:  # both links notice, reconnect with backoff, and the put goes through
                        try:
                            after.append(await writer.put(NewL1Entry(CONTEXT, "after", unit(6), Completion(text="b"),
                                                                     "L3")))
                            break
                        except StoreUnavailable:
                            await trio.sleep(0.05)
                    while after[0] not in seen:
                        await trio.sleep(0.01)
                    nursery.cancel_scope.cancel()
    finally:
        server.stop()
    assert after[0] > before
    assert seen == [before, after[0]]
