"""GET /metrics is valid Prometheus text: TYPE and HELP lines, escaped labels, latency histograms per tier."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from daari.metrics import Metrics, Sample
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

ASK = {"model": "good", "messages": [{"role": "user", "content": "metrics please"}]}


async def scrape_until(client: httpx.AsyncClient, needle: str) -> str:
    """Decisions reach the metrics subscriber asynchronously: scrape until the counted request shows."""
    with trio.fail_after(10):
        while True:
            text = (await client.get("/metrics")).text
            if needle in text:
                return text
            await trio.sleep(0.01)


async def test_metrics_page_is_prometheus_text_with_latency_histograms(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            assert (await client.post("/v1/chat/completions", json=ASK)).status_code == 200
            assert (await client.post("/v1/chat/completions", json=ASK)).status_code == 200  # an L0 hit
            server.parts.metrics.inc("errors_total", code='odd "code"\\with\nnewline')
            response = await client.get("/metrics")
            assert response.headers["content-type"].startswith("text/plain; version=")
            text = await scrape_until(client, 'daari_request_duration_seconds_count{tier="L0"}')
    assert "# TYPE daari_requests_total counter" in text
    assert "# HELP daari_requests_total " in text
    assert "# TYPE daari_request_duration_seconds histogram" in text
    assert 'code="odd \\"code\\"\\\\with\\nnewline"' in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    requests = {(s.labels["tier"], s.labels["cache"]): s.value for s in families["daari_requests"].samples}
    assert requests == {("L3", "miss"): 1.0, ("L0", "hit"): 1.0}
    durations = families["daari_request_duration_seconds"]
    assert durations.type == "histogram"
    counts = {s.labels["tier"]: s.value for s in durations.samples if s.name.endswith("_count")}
    assert counts == {"L3": 1.0, "L0": 1.0}
    buckets = [s for s in durations.samples if s.name.endswith("_bucket") and s.labels["tier"] == "L0"]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 1.0
    errors = [s for s in families["daari_errors"].samples]
    assert errors[0].labels["code"] == 'odd "code"\\with\nnewline'
    assert families["daari_actor_up"].type == "gauge"
    assert {s.labels["actor"] for s in families["daari_actor_up"].samples} >= {"cache", "executor"}
    assert families["daari_actor_restarts"].type == "counter"
    depth = {s.labels["actor"]: s.value for s in families["daari_actor_mailbox_depth"].samples}
    capacity = {s.labels["actor"]: s.value for s in families["daari_actor_mailbox_capacity"].samples}
    assert depth.keys() == capacity.keys() >= {"cache", "executor"}
    assert all(capacity[actor] > 0 and 0 <= depth[actor] <= capacity[actor] for actor in depth)


def test_a_metric_keeps_its_label_names() -> None:
    metrics = Metrics()
    metrics.inc("escalations_total", tier="L3")
    metrics.inc("escalations_total", 2, tier="L3")
    assert metrics.value("escalations_total", tier="L3") == 3
    with pytest.raises(ValueError, match="escalations_total"):
        metrics.inc("escalations_total", tier="L3", code="x")
    text = metrics.render([Sample("breaker_open", 1, {"tier": 'L"6'})]).decode()
    assert 'daari_breaker_open{tier="L\\"6"} 1.0' in text


async def test_a_restarting_actors_queue_shows_in_healthz_and_metrics(tmp_path: Path) -> None:
    """Asks queue in a mailbox while its actor waits out a restart backoff: /healthz and /metrics show how many."""
    from actors.executor import ListModels
    from daari.errors import ActorCrashed

    config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", "http://127.0.0.1:9/v1")},
                         actors={"backoff_initial_s": 60})
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
        executor = server.parts.executor
        with pytest.raises(ActorCrashed):
            await executor.call(object())  # type: ignore[arg-type]  # nobody handles it: a crash, then a 60 s backoff
        queued = 0
        while executor.tell(ListModels()):  # fills the mailbox: nothing takes from it during the backoff
            queued += 1
        health = await client.get("/healthz")
        text = (await client.get("/metrics")).text
    executor_health = health.json()["actors"]["executor"]
    assert health.status_code == 503 and executor_health["state"] == "restarting"
    assert executor_health["depth"] == executor_health["capacity"] == queued > 0
    families = {f.name: f for f in text_string_to_metric_families(text)}
    depth = {s.labels["actor"]: s.value for s in families["daari_actor_mailbox_depth"].samples}
    assert depth["executor"] == queued and depth["cache"] == 0
