"""Decisions are events: every request through a running daari publishes one RoutingDecision to the hub."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
import trio

from daari.pipeline.decision import RoutingDecision
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.protocol.chat import Completion
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

SECRET_PROMPT = "my password is hunter2-canary"
CHAT = {"model": "good", "messages": [{"role": "user", "content": SECRET_PROMPT}]}
HEADERS = {"user-agent": "claude-cli/1.0.83 (external, cli)", "authorization": "Bearer sk-canary-key-123"}


async def next_decision(sub: object) -> RoutingDecision:
    with trio.fail_after(5):
        return await sub.receive()  # type: ignore[attr-defined,no-any-return]


async def test_a_miss_then_a_hit_publish_one_decision_each(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, headers=HEADERS) as client:
            with server.parts.decisions.subscribe("test") as sub:
                first = await client.post("/v1/chat/completions", json=CHAT)
                miss = await next_decision(sub)
                second = await client.post("/v1/chat/completions", json={**CHAT, "stream": True})
                hit = await next_decision(sub)
    assert first.status_code == 200 and second.status_code == 200
    assert miss.request_id == first.headers["x-daari-request-id"]
    assert hit.request_id == second.headers["x-daari-request-id"] != miss.request_id
    assert (miss.protocol, miss.client, miss.model_requested, miss.stream) == ("openai", "claude-code", "good", False)
    assert (miss.status, miss.tier, miss.cache, miss.executor, miss.error) == (200, "L3", "miss", "openai", None)
    meta = first.json()["daari_meta"]
    assert (miss.rule_id, miss.task_type, miss.confidence) == (meta["rule_id"], meta["task_type"], meta["confidence"])
    assert miss.prompt_tokens == first.json()["usage"]["prompt_tokens"] > 0
    assert miss.completion_tokens == first.json()["usage"]["completion_tokens"] > 0
    assert [a.outcome for a in miss.attempts] == ["accepted"]
    assert miss.ttft_ms is not None and 0 < miss.ttft_ms <= miss.latency_ms
    assert (hit.tier, hit.cache, hit.stream, hit.status) == ("L0", "hit", True, 200)
    # No content, no headers: neither the prompt, the answer nor the key is in the record.
    answer = first.json()["choices"][0]["message"]["content"]
    for decision in (miss, hit):
        text = json.dumps(decision.to_json())
        assert "hunter2" not in text and "sk-canary" not in text and answer not in text


async def test_refused_requests_publish_decisions_in_the_clients_status(tmp_path: Path) -> None:
    config = make_config(tmp_path, server={"max_body_bytes": 1000})
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
        with server.parts.decisions.subscribe("test") as sub:
            bad = await client.post("/v1/messages", content=b"{not json", headers={"content-type": "application/json"})
            refused = await next_decision(sub)
            big = await client.post("/v1/chat/completions", json={**CHAT, "pad": "x" * 2000})
            too_big = await next_decision(sub)
    assert bad.status_code == 400 and (refused.protocol, refused.status) == ("anthropic", 400)
    assert refused.error == "InvalidRequest"
    assert big.status_code == 413 and (too_big.status, too_big.protocol) == (413, "openai")
    assert too_big.tier is None and too_big.error == "request_too_large"


async def test_a_client_that_leaves_is_recorded_as_499(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            with server.parts.decisions.subscribe("test") as sub:
                with trio.move_on_after(0.3):
                    await client.post("/v1/chat/completions", json={**CHAT, "model": "hang"})
                gone = await next_decision(sub)
    assert (gone.status, gone.error) == (499, "client_disconnected")


async def test_log_line_and_metrics_are_subscribers(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            assert "builtin" in server.parts.decisions.subscribers  # the log line and the metrics
            with caplog.at_level(logging.INFO, logger="daari.pipeline"):
                answered = await client.post("/v1/chat/completions", json=CHAT)
                refused = await client.post("/v1/chat/completions", json={"model": "good"})
                metrics = (await client.get("/metrics")).text
    request_id = answered.headers["x-daari-request-id"]
    lines = [r.getMessage() for r in caplog.records if r.name == "daari.pipeline"]
    assert any(request_id in line and "tier=L3" in line for line in lines)
    assert refused.status_code == 400
    assert any("status=400" in line for line in lines)
    assert not any("hunter2" in line for line in lines)
    assert 'daari_requests_total{cache="miss",tier="L3"} 1' in metrics
    assert "daari_errors_total{code=" in metrics


async def test_a_stalled_subscriber_is_dropped_and_never_slows_requests(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            stalled = server.parts.decisions.subscribe("stalled", buffer=2)  # never read
            with trio.fail_after(10):
                statuses = [(await client.post("/v1/chat/completions", json=CHAT)).status_code for _ in range(4)]
            metrics = (await client.get("/metrics")).text
    assert statuses == [200] * 4
    assert stalled.lagged and "stalled" not in server.parts.decisions.subscribers
    assert 'daari_decision_subscribers_dropped_total{subscriber="stalled"} 1' in metrics


async def test_requests_refused_by_the_guard_are_decisions_too(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
        with server.parts.decisions.subscribe("test") as sub:
            rebinding = await client.post("/v1/chat/completions", json=CHAT, headers={"host": "evil.example"})
            foreign = await next_decision(sub)
            plain = await client.post("/v1/messages", content=b"{}", headers={"content-type": "text/plain"})
            not_json = await next_decision(sub)
            health = await client.get("/healthz", headers={"host": "evil.example"})  # not a chat route
            assert health.status_code == 403
            with pytest.raises(trio.WouldBlock):  # published before the answer is sent, if at all
                sub.receive_nowait()
    assert rebinding.status_code == 403 and (foreign.status, foreign.protocol) == (403, "openai")
    assert plain.status_code == 415 and (not_json.status, not_json.protocol) == (415, "anthropic")
    assert foreign.error is not None and not_json.error is not None


class JudgingL1:
    """A shortcut tier that answers "ping" with its own judgement and declines anything else, saying why."""

    name = "L1"
    serves_agent_turns = False

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        if query.request.messages[-1].content == "ping":
            return ShortcutResult("L1", Completion(text="pong"), confidence=0.93, task_type="cache_hit",
                                  rule_id="L1-sim", details={"similarity": 0.97, "verified_by": "lexical"})
        return ShortcutResult("L1", None, confidence=0.0, details={"l1_declined": "numbers_differ"})

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        return None


async def test_a_shortcut_tiers_own_judgement_reaches_the_decision(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config, {"L1": JudgingL1()}) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            with server.parts.decisions.subscribe("test") as sub:
                await client.post("/v1/chat/completions", json={**CHAT, "messages": [{"role": "user",
                                                                                      "content": "ping"}]})
                answered = await next_decision(sub)
                await client.post("/v1/chat/completions", json=CHAT)
                declined = await next_decision(sub)
    assert (answered.tier, answered.executor, answered.confidence, answered.rule_id) == ("L1", "shortcut", 0.93,
                                                                                         "L1-sim")
    assert answered.details == {"similarity": 0.97, "verified_by": "lexical"}
    assert declined.tier == "L3" and declined.details == {"l1_declined": "numbers_differ"}


def test_decide_puts_every_fact_and_meta_field_in_its_own_field() -> None:
    """`decide` builds the record positionally (it runs per request): each field must get its own source."""
    from daari.pipeline.decision import AttemptRecord, RequestFacts, decide
    from daari.pipeline.meta import Attempt, Meta
    from daari.protocol.chat import Usage

    facts = RequestFacts("req_1", 12.5, "anthropic", "claude-code", "opus", True, "hash7", "the prompt")
    meta = Meta(tier="L4", task_type="refactor", executor="ollama", model="qwen", confidence=0.75,
                escalated_from=["L3"], rule_id="R-9", agent_turn=True, ceiling="L5", classifier="slm",
                attempts=[Attempt("L3", "low_confidence", 0.2, None), Attempt("L4", "accepted", 0.75)],
                warning="below_confidence_threshold", cache="miss", usage=Usage(11, 22), details={"similarity": 0.9})
    decision = decide(facts, meta, status=203, latency_ms=4.5, ttft_ms=1.5)
    assert decision == RoutingDecision(
        request_id="req_1", time=12.5, protocol="anthropic", client="claude-code", model_requested="opus",
        stream=True, status=203, tier="L4", executor="ollama", model="qwen", cache="miss", task_type="refactor",
        rule_id="R-9", ceiling="L5", classifier="slm", agent_turn=True, confidence=0.75, escalated_from=("L3",),
        attempts=(AttemptRecord("L3", "low_confidence", 0.2, None), AttemptRecord("L4", "accepted", 0.75, None)),
        warning="below_confidence_threshold", error=None, latency_ms=4.5, ttft_ms=1.5, prompt_tokens=11,
        completion_tokens=22, details={"similarity": 0.9}, prompt_hash="hash7", prompt="the prompt")
    failed = decide(facts, Meta(error="upstream_timeout"), status=504, latency_ms=1.0, ttft_ms=None, error="x")
    assert (failed.error, failed.attempts, failed.escalated_from, failed.prompt_tokens) == \
        ("upstream_timeout", (), (), None)
    assert decide(facts, Meta(), status=499, latency_ms=1.0, ttft_ms=None, error="client_disconnected").error == \
        "client_disconnected"
