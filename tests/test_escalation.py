"""Escalation and upstream faults through a running daari, with fake upstreams on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio

from actors.cache import L0Count
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

QUESTION = {"model": "daari", "messages": [{"role": "user", "content": "what does a git rebase do?"}]}
NO_RETRY = {"retry": {"max_retries": 0}}


def sse_data(text: str) -> list[Any]:
    return [json.loads(line[6:]) if line[6:] != "[DONE]" else "[DONE]"
            for line in text.splitlines() if line.startswith("data: ")]


async def test_refusal_at_l3_escalates_to_l4(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "refuse"),
                                              "L4": upstream_tier("ollama", u4, "good")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            body = (await client.post("/v1/chat/completions", json=QUESTION)).json()
    meta = body["daari_meta"]
    assert meta["tier"] == "L4" and meta["escalated_from"] == "L3"  # the spec: one tier, or null
    assert [(a["tier"], a["outcome"]) for a in meta["attempts"]] == [("L3", "low_confidence"), ("L4", "accepted")]
    assert "cannot" not in body["choices"][0]["message"]["content"]


async def test_all_local_tiers_weak_gives_best_attempt_with_warning_and_no_cache(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "short"),
                                              "L4": upstream_tier("ollama", u4, "refuse")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            first = (await client.post("/v1/chat/completions", json=QUESTION)).json()
            second = (await client.post("/v1/chat/completions", json=QUESTION)).json()
    assert first["daari_meta"]["warning"] == "below_confidence_threshold"
    assert [a["outcome"] for a in first["daari_meta"]["attempts"]] == ["low_confidence", "low_confidence"]
    assert second["daari_meta"]["cache_hit"] is False  # a weak answer with a better tier untried is not stored


async def test_a_weak_answer_from_the_only_tier_is_served_with_its_warning_and_never_replayed(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "short")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            first = (await client.post("/v1/chat/completions", json=QUESTION)).json()
            second = (await client.post("/v1/chat/completions", json=QUESTION)).json()
    assert first["daari_meta"]["warning"] == "below_confidence_threshold"
    # Nothing better could be asked, yet the weak answer is not stored: the repeat asks the tier again and
    # carries the same warning, instead of an L0 hit that would look like a good answer.
    assert second["daari_meta"]["cache_hit"] is False and second["daari_meta"]["tier"] == "L3"
    assert second["daari_meta"]["warning"] == "below_confidence_threshold"
    assert len(l3.requests) == 2


async def test_stream_escalation_sends_one_answer_only(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "refuse"),
                                              "L4": upstream_tier("ollama", u4, "good")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            response = await client.post("/v1/chat/completions", json={**QUESTION, "stream": True})
    chunks = sse_data(response.text)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1] if c["choices"])
    assert text == "Hello there!"  # FakeOllama's answer, and nothing of L3's refusal
    assert chunks[-1] == "[DONE]"
    assert chunks[-2]["daari_meta"]["tier"] == "L4"
    assert response.headers["x-daari-tier"] == "L4"


async def test_live_stream_mode_streams_from_first_tier_and_warns(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "refuse"),
                                              "L4": upstream_tier("ollama", u4, "good")},
                             routing={"stream_escalation": "live"})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            response = await client.post("/v1/chat/completions", json={**QUESTION, "stream": True})
    chunks = sse_data(response.text)
    assert chunks[-2]["daari_meta"]["tier"] == "L3"
    assert chunks[-2]["daari_meta"]["warning"] == "below_confidence_threshold"
    assert l4.requests == []


async def test_first_byte_timeout_escalates_to_next_tier(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        slow = {**NO_RETRY, "timeouts": {"first_byte_s": 0.3}}
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "hang", **slow),
                                              "L4": upstream_tier("ollama", u4, "good")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            body = (await client.post("/v1/chat/completions", json=QUESTION)).json()
            # Checked while both servers still run: stopping them would end the hanging request anyway.
            with trio.fail_after(2):
                while l3.closed_streams < 1:
                    await trio.sleep(0.005)
            assert l3.active_streams == 0  # the hanging upstream request was cancelled by the timeout
    assert body["daari_meta"]["tier"] == "L4"
    assert body["daari_meta"]["attempts"][0] == {"tier": "L3", "outcome": "failed", "confidence": None,
                                                 "error": "upstream_timeout"}


async def test_first_byte_timeout_with_no_next_tier_is_504_in_each_protocol(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    async with serve_app(l3) as u3:
        slow = {**NO_RETRY, "timeouts": {"first_byte_s": 0.3}}
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "hang", **slow)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            with trio.fail_after(1.3):  # the timeout plus one second
                response = await client.post("/v1/chat/completions", json=QUESTION)
            assert response.status_code == 504
            assert response.json()["error"]["code"] == "upstream_timeout"
            with trio.fail_after(1.3):
                response = await client.post("/v1/messages", json={
                    "model": "x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
            assert response.status_code == 504
            assert response.json()["type"] == "error"


async def test_500_then_success_is_retried_before_first_byte(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    l3.script = ["error500", "good"]
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier(
            "openai", u3 + "/v1", retry={"max_retries": 2, "backoff_initial_s": 0.01})})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            response = await client.post("/v1/chat/completions", json=QUESTION)
    assert response.status_code == 200 and response.json()["daari_meta"]["tier"] == "L3"
    assert len(l3.requests) == 2


async def test_429_retry_after_is_honoured_up_to_its_cap(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    l3.script = ["error429", "good"]
    async with serve_app(l3) as u3:
        retry = {"max_retries": 1, "backoff_initial_s": 0.01, "retry_after_cap_s": 0.05}
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", retry=retry)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            response = await client.post("/v1/chat/completions", json=QUESTION)
    assert response.status_code == 200 and len(l3.requests) == 2


async def test_persistent_429_reaches_the_client_as_429_with_retry_after(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "error429", **NO_RETRY)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            response = await client.post("/v1/chat/completions", json=QUESTION)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"


async def test_mid_stream_drop_sends_error_event_and_caches_nothing(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "drop")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            response = await client.post("/v1/chat/completions", json={**QUESTION, "stream": True})
            stored = await server.parts.cache.call(L0Count())
            anthropic = await client.post("/v1/messages", json={
                "model": "x", "max_tokens": 20, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    chunks = sse_data(response.text)
    assert "error" in chunks[-1] and "[DONE]" not in chunks
    assert not any(c["choices"][0].get("finish_reason") for c in chunks if isinstance(c, dict) and c.get("choices"))
    assert stored == 0
    assert len(l3.requests) == 2  # never retried after bytes reached the client
    assert "event: error" in anthropic.text and "message_stop" not in anthropic.text


async def test_malformed_upstream_json_is_a_clean_502(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "malformed", **NO_RETRY)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            openai_reply = await client.post("/v1/chat/completions", json=QUESTION)
            anthropic_reply = await client.post("/v1/messages", json={
                "model": "x", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
    assert openai_reply.status_code == 502 and openai_reply.json()["error"]["message"]
    assert anthropic_reply.status_code == 502 and anthropic_reply.json()["error"]["type"] == "api_error"


async def test_classified_ceiling_starts_the_chain_at_l4(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1"),
                                              "L4": upstream_tier("ollama", u4, "good")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            prompt = ("Implement a Python function that parses ISO 8601 durations like P3DT4H "
                      "and write pytest unit tests for it.")
            body = (await client.post("/v1/chat/completions", json={
                "model": "daari", "messages": [{"role": "user", "content": prompt}]})).json()
    assert body["daari_meta"]["rule_id"] == "R-P2" and body["daari_meta"]["ceiling"] == "L4"  # code work
    assert body["daari_meta"]["tier"] == "L4"
    assert l3.requests == []


async def test_self_evaluation_escalates_l4_to_l5(tmp_path: Path) -> None:
    l4, l5 = FakeOpenAI(), FakeOpenAI()
    l4.grade, l5.grade = "2", "5"
    async with serve_app(l4) as u4, serve_app(l5) as u5:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u4 + "/v1"),
                                              "L4": upstream_tier("openai", u4 + "/v1"),
                                              "L5": upstream_tier("openai", u5 + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            body = (await client.post("/v1/chat/completions", json=QUESTION, headers={})).json()
            pinned = (await client.post("/v1/chat/completions", json={
                **QUESTION, "messages": [{"role": "user", "content": "Refactor this module into classes."}]})).json()
    assert body["daari_meta"]["tier"] == "L3"  # L3's heuristic passes: no self-evaluation there
    meta = pinned["daari_meta"]
    assert meta["ceiling"] == "L4"
    assert [(a["tier"], a["outcome"], a["confidence"]) for a in meta["attempts"]] == [
        ("L4", "low_confidence", 0.4), ("L5", "accepted", 1.0)]


async def test_circuit_breaker_opens_and_shows_in_health(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    async with serve_app(l3) as u3:
        tier = upstream_tier("openai", u3 + "/v1", "error500", breaker={"failure_threshold": 2, "cooldown_s": 60},
                             **NO_RETRY)
        config = make_config(tmp_path, tiers={"L3": tier})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            statuses = [(await client.post("/v1/chat/completions", json=QUESTION)).status_code for _ in range(3)]
            health = (await client.get("/healthz")).json()
            metrics = (await client.get("/metrics")).text
    assert statuses == [502, 502, 503]
    assert len(l3.requests) == 2  # the open circuit kept the third request away from the upstream
    assert health["tiers"]["L3"]["breaker"]["state"] == "open"
    assert 'daari_breaker_open{tier="L3"} 1' in metrics


async def test_models_list_includes_what_ollama_serves(tmp_path: Path) -> None:
    l3 = FakeOllama()
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("ollama", u3)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            ids = [m["id"] for m in (await client.get("/v1/models")).json()["data"]]
    assert ids[0] == "daari" and {"good:latest", "tools:latest"} <= set(ids)
