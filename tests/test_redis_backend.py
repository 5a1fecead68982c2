"""cache.backend: redis through running daari: several instances sharing one real redis-server, racing on one key,
L1 across instances, and Redis stopped and restarted mid-run (requests bypass the cache, then it comes back)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from actors.semantic_cache import L1Count
from daari.pipeline.steps.l1 import SemanticTier
from daari.server.serve import RunningServer
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.redis_server import RedisServer, needs_redis
from tests.support import daari_server, make_config, upstream_tier

pytestmark = needs_redis


class Labeled(FakeOpenAI):
    """A fake upstream whose answers end with its label: which instance's upstream call produced an answer."""

    def __init__(self, label: str) -> None:
        super().__init__()
        self.label = label

    def _answer(self, behaviour: str, body: dict[str, Any]) -> Any:
        text, calls, reason = super()._answer(behaviour, body)  # type: ignore[misc]
        return f"{text} [{self.label}]", calls, reason


def content(body: dict[str, Any]) -> str:
    return str(body["choices"][0]["message"]["content"])


def chat(text: str) -> dict[str, Any]:
    return {"model": "good", "messages": [{"role": "user", "content": text}]}


def redis_config(tmp_path: Path, name: str, upstream: str, redis_url: str, *, l1: bool = False,
                 **redis: Any) -> Any:
    return make_config(tmp_path / name, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                       cache={"backend": "redis", "l1": {"enabled": l1},
                              "redis": {"url": redis_url, "key_prefix": "team:", "timeout_s": 2.0, **redis}})


@asynccontextmanager
async def instances(tmp_path: Path, redis_url: str, count: int, **kwargs: Any
                    ) -> AsyncIterator[tuple[list[RunningServer], list[Labeled]]]:
    """`count` daari on one Redis, each with its own data dir and its own upstream, labeled "up<i>"."""
    async with AsyncExitStack() as stack:
        fakes = [Labeled(f"up{i}") for i in range(count)]
        urls = [await stack.enter_async_context(serve_app(fake)) for fake in fakes]
        servers = [await stack.enter_async_context(daari_server(redis_config(
            tmp_path, f"d{i}", urls[i], redis_url, **kwargs))) for i in range(count)]
        for server in servers:
            assert server.parts.redis_link is not None and server.parts.redis_link.up  # up before listening
        yield servers, fakes


def upstream_calls(fakes: list[Labeled]) -> int:
    return sum(len([r for r in fake.requests if r.path == "/v1/chat/completions"]) for fake in fakes)


async def ask(client: httpx.AsyncClient, url: str, text: str) -> dict[str, Any]:
    response = await client.post(url + "/v1/chat/completions", json=chat(text))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_an_answer_stored_by_one_instance_is_an_l0_hit_on_another(tmp_path: Path, redis: RedisServer) -> None:
    async with instances(tmp_path, redis.url, 2) as ((one, two), fakes), httpx.AsyncClient() as client:
        first = await ask(client, one.url, "what does git rebase do?")
        assert first["daari_meta"]["cache"] == "miss" and content(first).endswith("[up0]")
        with trio.fail_after(10):  # the put is answered from memory; the Redis write follows in the writer's batch
            while not redis.cli("KEYS", "team:l0:*"):
                await trio.sleep(0.01)
        second = await ask(client, two.url, "what does git rebase do?")
    assert second["daari_meta"]["cache"] == "hit" and second["daari_meta"]["tier"] == "L0"
    assert content(second) == content(first)  # instance 0's answer, served by instance 1 without asking upstream
    assert upstream_calls(fakes) == 1


async def test_two_instances_racing_on_one_key_keep_one_entry_and_then_agree(tmp_path: Path,
                                                                              redis: RedisServer) -> None:
    """Both miss, both ask their upstream (slow), both put: the first put stays whole in Redis, the second is
    told, and from then on both instances serve the same answer for that request."""
    async with instances(tmp_path, redis.url, 2) as (servers, fakes), httpx.AsyncClient(timeout=30) as client:
        for fake in fakes:
            fake.delay_s = 1.0  # both requests are in flight (past L0) before either answer is stored
        answers: list[dict[str, Any]] = [{}, {}]

        async def race(i: int) -> None:
            answers[i] = await ask(client, servers[i].url, "explain the borrow checker")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(race, 0)
            nursery.start_soon(race, 1)
        assert [content(a)[-5:] for a in answers] == ["[up0]", "[up1]"]  # each from its own upstream call
        assert all(a["daari_meta"]["cache"] == "miss" for a in answers)
        with trio.fail_after(10):
            while True:
                again = [await ask(client, s.url, "explain the borrow checker") for s in servers]
                if content(again[0]) == content(again[1]):
                    break
                await trio.sleep(0.02)
        conflicts = [s.parts.metrics.counter("cache_put_conflicts_total").cells.get((), [0])[0] for s in servers]
    assert all(a["daari_meta"]["cache"] == "hit" for a in again)
    keys = redis.cli("KEYS", "team:l0:*").split()
    assert len(keys) == 1
    assert content(again[0])[-5:] in redis.cli("GET", keys[0])  # the entry that stayed is the one both serve
    assert sorted(conflicts) == [0, 1]  # exactly one instance lost the race and took the winner's entry
    assert upstream_calls(fakes) == 2


async def test_redis_stopped_mid_run_is_bypassed_and_the_cache_returns_with_it(tmp_path: Path) -> None:
    """A real redis-server stopped while requests run: 0 failed requests, each one bypassed (no wait: the link
    knows Redis is down), /healthz and /metrics say so; restarted, daari reconnects and caches again."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    fake = FakeOpenAI()
    try:
        async with serve_app(fake) as upstream, daari_server(redis_config(
                tmp_path, "d", upstream, server.url, timeout_s=0.5, reconnect_initial_s=0.05,
                reconnect_max_s=0.2)) as daari, httpx.AsyncClient(base_url=daari.url, timeout=30) as client:
            results: list[tuple[int, str]] = []

            async def load(phase: str, count: int) -> None:
                for i in range(count):
                    response = await client.post("/v1/chat/completions", json=chat(f"{phase} question {i % 3}"))
                    results.append((response.status_code, response.json()["daari_meta"]["cache"]
                                    if response.status_code == 200 else response.text))

            await load("before", 6)
            assert [c for _, c in results] == ["miss"] * 3 + ["hit"] * 3
            server.stop()
            await load("during", 6)
            health = (await client.get("/healthz")).json()
            metrics = (await client.get("/metrics")).text
            assert health["status"] == "ok" and health["redis"]["state"] == "down"
            assert 'daari_redis_up{link="cache"} 0.0' in metrics
            server.start()
            with trio.fail_after(20):
                while (await client.get("/healthz")).json()["redis"]["state"] != "up":
                    await trio.sleep(0.05)
            results.clear()
            await load("after", 6)
            assert [c for _, c in results] == ["miss"] * 3 + ["hit"] * 3  # a restarted Redis lost its data
            metrics = (await client.get("/metrics")).text
    finally:
        server.stop()
    assert 'daari_redis_up{link="cache"} 1.0' in metrics
    assert 'daari_redis_reconnects_total{link="cache"} 1.0' in metrics
    assert 'daari_cache_bypassed_total{op="read"}' in metrics


async def test_l1_entries_one_instance_stores_are_searched_by_another(tmp_path: Path, redis: RedisServer) -> None:
    """The paraphrase of a prompt instance 0 answered is an L1 hit on instance 1: the entry reached instance 1's
    index through the Redis stream."""
    async with instances(tmp_path, redis.url, 2, l1=True) as ((one, two), _), \
            httpx.AsyncClient(timeout=60) as client:
        for server in (one, two):
            tier = server.parts.shortcuts["L1"]
            assert isinstance(tier, SemanticTier)
            with trio.fail_after(120):
                await tier.status.started.wait()
        first = await ask(client, one.url, "How do I list Docker containers?")
        assert first["daari_meta"]["tier"] == "L3"
        with trio.fail_after(20):
            while await two.parts.table.address("l1").call(L1Count()) < 1:
                await trio.sleep(0.01)
        hit = await ask(client, two.url, "Show me the command to list docker containers")
        near_miss = await ask(client, two.url, "How do I list Docker images?")
        with trio.fail_after(20):  # the near miss's answer is stored after the reply (a tell): one more record
            while redis.cli("XLEN", "team:l1:log") != "2":
                await trio.sleep(0.01)
        with trio.fail_after(20):  # and it reaches instance 0's index through the stream too
            while await one.parts.table.address("l1").call(L1Count()) < 2:
                await trio.sleep(0.01)
    assert hit["daari_meta"]["tier"] == "L1" and content(hit) == content(first)
    assert near_miss["daari_meta"]["tier"] == "L3"


async def test_a_redis_that_stops_answering_is_bypassed_after_one_timeout_then_reconnected(tmp_path: Path) -> None:
    """A real redis-server frozen (SIGSTOP: its connections stay open, nothing answers) under concurrent requests:
    every request succeeds; the first L0 read that waits runs out its timeout and marks the link down, so the
    requests after it bypass the cache without waiting. Thawed, daari reconnects and caches again."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    fake = FakeOpenAI()
    try:
        async with serve_app(fake) as upstream, daari_server(redis_config(
                tmp_path, "d", upstream, server.url, timeout_s=0.3, reconnect_initial_s=0.05,
                reconnect_max_s=0.2)) as daari, httpx.AsyncClient(base_url=daari.url, timeout=30) as client:
            assert (await client.post("/v1/chat/completions", json=chat("warm up"))).status_code == 200
            with trio.fail_after(10):
                while not server.cli("KEYS", "team:l0:*"):
                    await trio.sleep(0.01)
            server.pause()
            try:
                statuses: list[int] = []
                caches: list[str] = []

                async def one(i: int) -> None:
                    response = await client.post("/v1/chat/completions", json=chat(f"frozen question {i}"))
                    statuses.append(response.status_code)
                    caches.append(response.json()["daari_meta"]["cache"])

                with trio.fail_after(20):  # a hang guard, not a speed assertion
                    async with trio.open_nursery() as nursery:
                        for i in range(8):
                            nursery.start_soon(one, i)
                health = (await client.get("/healthz")).json()
            finally:
                server.resume()
            assert statuses == [200] * 8
            assert set(caches) == {"bypassed"}
            assert health["status"] == "ok" and health["redis"]["state"] == "down"
            assert "timed out" in health["redis"]["last_error"]
            with trio.fail_after(20):
                while (await client.get("/healthz")).json()["redis"]["state"] != "up":
                    await trio.sleep(0.05)
            before = set(server.cli("KEYS", "team:l0:*").split())
            first = (await client.post("/v1/chat/completions", json=chat("after the thaw"))).json()
            with trio.fail_after(10):  # the put is answered from memory; its Redis write follows
                while not set(server.cli("KEYS", "team:l0:*").split()) - before:
                    await trio.sleep(0.01)
            assert first["daari_meta"]["cache"] == "miss"
    finally:
        server.stop()
