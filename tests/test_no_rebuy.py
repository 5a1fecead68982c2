"""Non-stream upstream calls are not bought twice: first_byte_s is the response headers, and nothing is
retried once the upstream may have started generating. Through a running daari and a fake upstream."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

CHAT = {"model": "good", "messages": [{"role": "user", "content": "explain the borrow checker"}]}
RETRIES = {"retry": {"max_retries": 2, "backoff_initial_s": 0.01}}


def tier(upstream: str, **timeouts: float) -> dict[str, object]:
    return upstream_tier("openai", upstream + "/v1", **RETRIES, timeouts=timeouts)


async def chat_calls(fake: FakeOpenAI) -> int:
    return sum(1 for r in fake.requests if r.path == "/v1/chat/completions")


async def test_a_slow_body_after_prompt_headers_is_governed_by_idle_not_first_byte(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    fake.body_delay_s = 0.8  # headers at once, the answer 0.8 s later: longer than first_byte_s
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": tier(upstream, first_byte_s=0.3, idle_s=5)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            response = await client.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 200, response.text
    assert "borrow checker" in response.json()["choices"][0]["message"]["content"]
    assert await chat_calls(fake) == 1  # today: 3 calls (each timed out after 0.3 s) and a 504


async def test_a_first_byte_timeout_is_not_retried(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    fake.delay_s = 0.8  # no headers for 0.8 s: the request was sent, the upstream may be generating
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": tier(upstream, first_byte_s=0.3)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            response = await client.post("/v1/chat/completions", json=CHAT)
            with trio.fail_after(2):
                while fake.closed_streams < 1:
                    await trio.sleep(0.005)
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    assert await chat_calls(fake) == 1


async def test_an_idle_body_times_out_without_a_retry(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    fake.body_delay_s = 1.0
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": tier(upstream, first_byte_s=5, idle_s=0.3)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            response = await client.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 504 and "idle" in response.json()["error"]["message"]
    assert await chat_calls(fake) == 1


async def test_5xx_answered_before_any_body_is_still_retried(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    fake.script = ["error500", "error429", "good"]
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier(
            "openai", upstream + "/v1", retry={"max_retries": 2, "backoff_initial_s": 0.01,
                                               "retry_after_cap_s": 0.01})})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            response = await client.post("/v1/chat/completions", json=CHAT)
    assert response.status_code == 200
    assert await chat_calls(fake) == 3
