"""A cache that fails is bypassed, not fatal: the CacheActor crashed, its data dir gone, its disk full.

Requests are answered as if the cache were off, daari_meta.cache says "bypassed", metrics count it, and a
streamed answer whose L0 write fails still ends cleanly (no error event).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from daari.errors import ActorCrashed
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app, serve_app_in_thread
from tests.support import daari_server, make_config, upstream_tier
from tests.test_cli import LISTENING


def chat(text: str, stream: bool = False) -> dict[str, object]:
    return {"model": "good", "messages": [{"role": "user", "content": text}], "stream": stream}


def sse_data(text: str) -> list[str]:
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def stream_meta(text: str) -> dict[str, object]:
    events = sse_data(text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert not any("error" in c for c in chunks)  # no error event: the stream ended cleanly
    last: dict[str, object] = chunks[-1]["daari_meta"]
    return last


async def wait_failed(server: object, name: str) -> None:
    health = server.parts.health  # type: ignore[attr-defined]
    with trio.fail_after(5):
        while health.status(name).state != "failed":
            await trio.sleep(0.005)


async def test_a_crashed_cache_actor_is_bypassed(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             actors={"max_restarts": 0})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            with pytest.raises(ActorCrashed):
                await server.parts.cache.call(object())  # type: ignore[arg-type]  # a message it cannot handle: a crash, no restart
            await wait_failed(server, "cache")
            plain = await client.post("/v1/chat/completions", json=chat("what is a closure?"))
            streamed = await client.post("/v1/chat/completions", json=chat("what is a monad?", stream=True))
            again = await client.post("/v1/chat/completions", json=chat("what is a closure?"))
            metrics = (await client.get("/metrics")).text
    assert plain.status_code == 200, plain.text
    assert plain.json()["daari_meta"]["cache"] == "bypassed" and plain.headers["x-daari-cache"] == "bypassed"
    assert plain.json()["daari_meta"]["tier"] == "L3"
    assert streamed.status_code == 200 and stream_meta(streamed.text)["cache"] == "bypassed"
    assert again.status_code == 200 and again.json()["daari_meta"]["cache_hit"] is False
    assert len([r for r in fake.requests if r.path == "/v1/chat/completions"]) == 3  # routed as if off
    assert 'daari_cache_bypassed_total{op="read"} 3' in metrics


async def test_a_cache_whose_data_dir_is_gone_when_it_restarts_is_bypassed(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             actors={"max_restarts": 1, "backoff_initial_s": 0.01})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            first = await client.post("/v1/chat/completions", json=chat("explain tail calls", stream=True))
            data = Path(config.data_dir)
            await trio.to_thread.run_sync(shutil.rmtree, data)
            await trio.to_thread.run_sync(data.write_text, "not a directory any more")  # no store to reopen
            with pytest.raises(ActorCrashed):
                await server.parts.cache.call(object())  # type: ignore[arg-type]
            await wait_failed(server, "cache")
            fresh = await client.post("/v1/chat/completions", json=chat("explain currying", stream=True))
            health = await client.get("/healthz")
    assert first.status_code == 200 and stream_meta(first.text)["cache"] == "miss"
    assert fresh.status_code == 200 and stream_meta(fresh.text)["cache"] == "bypassed"
    assert health.status_code == 503 and health.json()["actors"]["cache"]["state"] == "failed"


@pytest.fixture
def upstream() -> Iterator[str]:
    with serve_app_in_thread(FakeOpenAI()) as url:
        yield url


def test_a_full_disk_is_bypassed_and_never_breaks_a_response(tmp_path: Path, upstream: str) -> None:
    """daari as a subprocess whose files may not grow past 192 KiB (RLIMIT_FSIZE): its disk is full."""
    limit = 192 * 1024

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    config = tmp_path / "daari.yaml"
    config.write_text(f"tiers:\n  L3: {{executor: openai, base_url: '{upstream}/v1'}}\n")
    env = {**os.environ, "DAARI_LOG_LEVEL": "INFO", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "daari", "serve", "--config", str(config), "--port", "0",
                             "--data-dir", str(tmp_path / "data")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=small_disk)
    try:
        assert proc.stdout is not None
        url = None
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            match = LISTENING.search(line)
            if match:
                url = match.group(1)
                break
            assert time.monotonic() < deadline, "daari serve did not report its address"
        assert url is not None
        caches: list[object] = []
        with httpx.Client(base_url=url, timeout=30) as client:
            for i in range(16):  # each answer echoes its ~24 KiB question: the store outgrows the limit
                body = chat(f"question {i}: " + "lorem ipsum dolor " * 1400, stream=i % 2 == 1)
                response = client.post("/v1/chat/completions", json=body)
                assert response.status_code == 200, response.text[:300]
                meta = stream_meta(response.text) if i % 2 else response.json()["daari_meta"]
                caches.append(meta["cache"])
            metrics = client.get("/metrics").text
            health = client.get("/healthz").json()
    finally:
        proc.terminate()
        proc.wait(15)
    assert caches[0] == "miss" and "bypassed" in caches  # stored while it fit, bypassed once full
    assert "daari_cache_write_failures_total" in metrics
    assert 'daari_cache_bypassed_total{op="write"}' in metrics
    assert health["actors"]["cache"] == {"state": "running", "restarts": 0, "last_error": None, "depth": 0,
                                         "capacity": health["actors"]["cache"]["capacity"]}
