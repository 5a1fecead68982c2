"""CPU off the event loop: a large request body is decoded, validated and hashed on a worker thread, so a
small cached request is answered while it waits; a small body is parsed inline. Through a running daari."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

SMALL = {"model": "good", "messages": [{"role": "user", "content": "what is a rebase?"}]}
LARGE = {"model": "good", "messages": [
    {"role": "user", "content": f"file {i}:\n" + "def f(x):\n    return x * 2\n" * 400} for i in range(400)]}


async def test_a_large_body_waits_for_a_worker_thread_while_small_requests_are_answered(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             server={"thread_parse_bytes": 1_000_000})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for body in (SMALL, LARGE):  # both stored: from here both are L0 hits
                assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
            limiter = server.parts.body_work.limiter
            holders = [object() for _ in range(int(limiter.total_tokens))]
            for holder in holders:  # every worker thread is taken
                await limiter.acquire_on_behalf_of(holder)
            large: list[httpx.Response] = []

            async def send_large() -> None:
                large.append(await client.post("/v1/chat/completions", json=LARGE))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_large)
                with trio.fail_after(10):  # until the large body queues for a thread (or, inline, is answered)
                    while not (limiter.statistics().tasks_waiting or large):
                        await trio.sleep(0.005)
                assert not large, "the large body was parsed without a worker thread"
                small = await client.post("/v1/chat/completions", json=SMALL)
                assert small.status_code == 200 and small.headers["x-daari-cache"] == "hit"
                assert not large  # still waiting for its thread: nothing of it ran on the event loop
                for holder in holders:
                    limiter.release_on_behalf_of(holder)
    assert large[0].status_code == 200 and large[0].headers["x-daari-cache"] == "hit"


async def test_a_small_body_and_bad_json_stay_inline_and_in_the_clients_shape(tmp_path: Path) -> None:
    config = make_config(tmp_path, server={"thread_parse_bytes": 1000})
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        limiter = server.parts.body_work.limiter
        holders = [object() for _ in range(int(limiter.total_tokens))]
        for holder in holders:
            await limiter.acquire_on_behalf_of(holder)
        with trio.fail_after(10):
            bad = await client.post("/v1/messages", content=b"{" * 10, headers={"content-type": "application/json"})
        for holder in holders:
            limiter.release_on_behalf_of(holder)
        big_bad = await client.post("/v1/messages", content=b"[" + b"1," * 2000,
                                    headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["type"] == "error"  # parsed inline: no thread was free
    assert big_bad.status_code == 400 and big_bad.json()["error"]["type"] == "invalid_request_error"
