"""Cancellation paths through a running daari: client disconnect, actor crash, shutdown with requests in flight."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

from actors.cache import L0Count
from daari.errors import ActorCrashed
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, tasks_named, upstream_tier

CHAT = {"model": "good", "messages": [{"role": "user", "content": "tell me about trio"}]}


async def wait_for(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    # A generous bound: it only ends a test that would otherwise hang; nothing asserted is about time (the
    # suite runs on loaded 2-core machines).
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.005)


async def test_client_disconnect_mid_stream_closes_upstream_and_caches_nothing(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            body = {**CHAT, "model": "hang_stream", "stream": True}
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        break  # one chunk arrived; now the client goes away
            await wait_for(lambda: fake.active_streams == 0 and fake.closed_streams == 1)
            assert await server.parts.cache.call(L0Count()) == 0
            # daari is fine afterwards.
            ok = await client.post("/v1/chat/completions", json=CHAT)
            assert ok.status_code == 200


async def test_disconnect_before_first_byte_cancels_a_hanging_upstream(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(partial(client.post, "/v1/chat/completions", json={**CHAT, "model": "hang"}))
                await wait_for(lambda: fake.active_streams == 1)  # the upstream call is open, no byte answered
                nursery.cancel_scope.cancel()  # the client hangs up
            await wait_for(lambda: fake.closed_streams == 1)
            assert fake.active_streams == 0


async def test_crashed_executor_actor_is_restarted_and_next_request_succeeds(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             actors={"backoff_initial_s": 0.01})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            with pytest.raises(ActorCrashed):
                await server.parts.executor.call(object())  # type: ignore[arg-type]  # nobody handles it: a crash
            response = await client.post("/v1/chat/completions", json=CHAT)
            assert response.status_code == 200 and response.json()["daari_meta"]["tier"] == "L3"
            health = (await client.get("/healthz")).json()
            assert health["actors"]["executor"]["restarts"] == 1
            assert health["actors"]["executor"]["state"] == "running"


async def test_shutdown_lets_in_flight_requests_finish_then_stops(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    fake.delay_s = 0.3  # slower than nothing, well inside the 2 s grace period
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        results: list[int] = []
        async with trio.open_nursery() as nursery:
            from daari.server.serve import run_server

            server = await nursery.start(run_server, config)
            async with httpx.AsyncClient(base_url=server.url) as client:
                async def one() -> None:
                    results.append((await client.post("/v1/chat/completions", json=CHAT)).status_code)

                nursery.start_soon(one)
                await wait_for(lambda: fake.active_streams == 1)
                server.shutdown.set()
                await wait_for(lambda: bool(results), timeout=5)
            # run_server returns on its own once the in-flight request is done: the nursery exits.
        assert results == [200]
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient() as late:
                await late.post(server.url + "/v1/chat/completions", json=CHAT)


async def test_shutdown_cancels_requests_still_running_after_the_grace_period(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             server={"port": 0, "grace_period_s": 0.2})
        async with trio.open_nursery() as nursery:
            from daari.server.serve import run_server

            server = await nursery.start(run_server, config)

            async def hanging_request() -> None:
                async with httpx.AsyncClient(base_url=server.url) as client:
                    with pytest.raises(httpx.HTTPError):
                        await client.post("/v1/chat/completions", json={**CHAT, "model": "hang"})

            nursery.start_soon(hanging_request)
            await wait_for(lambda: fake.active_streams == 1)
            server.shutdown.set()
        # The grace period passed, the hanging request was cancelled, and its upstream call closed.
        await wait_for(lambda: fake.closed_streams == 1)


async def test_a_full_tier_queue_sheds_with_503_and_529(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", "hang", max_concurrency=1, max_queue=1)
        config = make_config(tmp_path, tiers={"L3": tier})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            async with trio.open_nursery() as nursery:
                async def hanging() -> None:
                    await client.post("/v1/chat/completions", json=CHAT)

                for _ in range(2):  # one running, one queued
                    nursery.start_soon(hanging)
                await wait_for(lambda: fake.active_streams == 1)
                await trio.testing.wait_all_tasks_blocked(0.05)
                with trio.fail_after(5):  # without the bound these would queue forever
                    shed = await client.post("/v1/chat/completions", json=CHAT)
                    shed_anthropic = await client.post("/v1/messages", json={
                        "model": "x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
                nursery.cancel_scope.cancel()
    assert shed.status_code == 503 and "max_queue" in shed.json()["error"]["message"]
    assert shed_anthropic.status_code == 529
    assert shed_anthropic.json()["error"]["type"] == "overloaded_error"



async def test_the_client_watch_of_a_finished_request_ends(tmp_path: Path) -> None:
    # The watch is a task of the server's nursery that ends on the `http.disconnect` Hypercorn reports when a
    # request's stream closes: requests answered on a kept-alive connection, whole and streamed, leave no
    # watcher waiting.
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            for stream in (False, True, False, True):
                response = await client.post("/v1/chat/completions", headers={"X-Daari-No-Cache": "true"},
                                             json={**CHAT, "stream": stream})
                assert response.status_code == 200
            await wait_for(lambda: tasks_named("client watch") == 0)
            server.shutdown.set()
