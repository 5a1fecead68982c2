"""Refused requests: one log line each (reason, status, no content) and counted; cache hits show at the
default log level in a periodic summary."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing

from actors.hub import Hub
from daari.metrics import Metrics
from daari.pipeline.decision import RequestFacts, RoutingDecision, decide
from daari.pipeline.decision_subscribers import attach_decision_subscribers
from daari.pipeline.decision_summary import DecisionSummary, log_summaries
from daari.pipeline.meta import Meta
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

SECRET_PROMPT = "my secret prompt text"


def decision(tier: str | None, cache: str = "miss", error: str | None = None) -> RoutingDecision:
    meta = Meta(tier=tier, cache=cache, error=error)
    facts = RequestFacts(request_id="req_1", time=0.0, protocol="openai", client="curl")
    return decide(facts, meta, status=200 if error is None else 400, latency_ms=1.0, ttft_ms=None)


def test_summary_counts_hits_answers_and_errors() -> None:
    summary = DecisionSummary()
    assert summary.take(60) is None
    for d in (decision("L0", "hit"), decision("L0", "hit"), decision("L3"), decision(None, error="bad")):
        summary.add(d)
    assert summary.take(60) == "last 60s: 4 requests, 2 L0 hits (50%), 1 answered (L3 1), 1 errors"
    assert summary.take(60) is None  # counted once


async def test_summary_is_logged_every_interval(caplog: pytest.LogCaptureFixture,
                                               mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0  # virtual time: the test takes no wall-clock minutes
    caplog.set_level(logging.INFO, logger="daari.pipeline")
    hub: Hub[RoutingDecision] = Hub()
    summary = DecisionSummary()
    async with trio.open_nursery() as nursery:
        # As serve.py wires it: the summary counts in the hub's attached in-process handler.
        attach_decision_subscribers(hub, Metrics(), [summary.add])
        nursery.start_soon(log_summaries, summary, 30.0)
        hub.publish(decision("L0", "hit"))
        await trio.sleep(31)
        hub.publish(decision("L3"))
        await trio.sleep(30)
        await trio.sleep(30)  # idle: no line
        nursery.cancel_scope.cancel()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("last 30s")]
    assert lines == ["last 30s: 1 requests, 1 L0 hits (100%), 0 answered, 0 errors",
                     "last 30s: 1 requests, 0 L0 hits (0%), 1 answered (L3 1), 0 errors"]


async def test_every_refusal_logs_one_line_and_is_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            missing = await client.post("/v1/nothing", json={"q": SECRET_PROMPT})
            wrong = await client.get("/v1/chat/completions")
            bad_count = await client.post("/v1/messages/count_tokens", json={"messages": SECRET_PROMPT})
            bad_chat = await client.post("/v1/chat/completions", json={"messages": [{"role": "robot",
                                                                                     "content": SECRET_PROMPT}]})
            assert (missing.status_code, wrong.status_code, bad_count.status_code, bad_chat.status_code) == (
                404, 405, 400, 400)
            assert bad_count.json()["type"] == "error"  # Anthropic's shape on an Anthropic route
            metrics = (await client.get("/metrics")).text
    refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert refused == [
        "refused POST /v1/nothing protocol=openai status=404 reason=not_found",
        "refused GET /v1/chat/completions protocol=openai status=405 reason=method_not_allowed",
        "refused POST /v1/messages/count_tokens protocol=anthropic status=400 reason=InvalidRequest param=messages",
    ]
    # The chat refusal's one line is its routing decision's.
    chat_lines = [r.getMessage() for r in caplog.records if "status=400" in r.getMessage()
                  and "openai json" in r.getMessage()]
    assert len(chat_lines) == 1
    assert SECRET_PROMPT not in caplog.text
    assert 'daari_refused_total{code="not_found",status="404"} 1.0' in metrics
    assert 'daari_refused_total{code="InvalidRequest",status="400"} 2.0' in metrics
