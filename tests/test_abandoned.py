"""A request whose client left first is `abandoned`, not an error: in the report, the metrics, the periodic
summary and the log line (issue 19: `claude -p` exits before its title call ends, and `daari report` showed
"20 requests, 7 errors" for runs that all succeeded)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from daari.observe.report import render_text, summarize
from daari.pipeline.decision import RoutingDecision, outcome
from daari.pipeline.decision_subscribers import log_decision
from daari.pipeline.decision_summary import DecisionSummary
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

CHAT = {"model": "daari", "messages": [{"role": "user", "content": "what does git rebase do?"}]}


def row(index: int, **extra: Any) -> dict[str, Any]:
    return {"request_id": f"r{index}", "time": time.time(), "tier": "L6", "latency_ms": 900.0, "cache": "miss",
            "client": "claude-code", "status": 200, **extra}


def test_claude_p_runs_are_not_errors() -> None:
    # 13 answered, 7 title calls whose `claude -p` had exited (the tier was still generating), 1 real error.
    rows = [*(row(i) for i in range(13)),
            *(row(20 + i, status=499, error="client_disconnected", tier="L3") for i in range(7)),
            row(40, status=502, error="upstream_error", tier=None)]
    report = summarize(rows)
    assert (report["requests"], report["answered"], report["errors"], report["abandoned"]) == (21, 13, 1, 7)
    assert render_text(report, "24h").startswith("daari report, last 24h: 21 requests, 1 errors, 7 abandoned")
    assert report["tiers"]["L6"]["requests"] == 13 and "L3" not in report["tiers"]


def test_outcomes() -> None:
    assert outcome(None, 200) == "answered"
    assert outcome("client_disconnected", 499) == "abandoned"
    assert outcome(None, 499) == "abandoned"
    assert outcome("upstream_timeout", 504) == "error"


def decision(error: str | None, status: int) -> RoutingDecision:
    return RoutingDecision("req_1", 1.7e9, "anthropic", "claude-code", "claude-haiku", True, status, "L3",
                           "embedded", None, "miss", "generate_small", "R-C1", "L3", "heuristic", False, None, (), (),
                           None, error, 51_000.0, None, None, None)


def test_summary_line_and_log_level(caplog: pytest.LogCaptureFixture) -> None:
    summary = DecisionSummary()
    for d in (decision(None, 200), decision("client_disconnected", 499), decision("upstream_error", 502)):
        summary.add(d)
    assert summary.take(60).endswith("1 answered (L3 1), 1 errors, 1 abandoned")  # type: ignore[union-attr]
    with caplog.at_level(logging.INFO, logger="daari.pipeline"):
        log_decision(decision("client_disconnected", 499))
    assert caplog.records[-1].levelno == logging.INFO and "abandoned (client left)" in caplog.records[-1].message


async def test_a_client_that_leaves_shows_as_abandoned_in_report_and_metrics(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             log={"decisions": True, "flush_interval_s": 0.05})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            with trio.move_on_after(0.5):  # the client gives up while the upstream is still answering
                await client.post("/v1/chat/completions", json={**CHAT, "model": "hang"})
            ok = await client.post("/v1/chat/completions", json=CHAT)
            report: dict[str, Any] = {}
            with trio.move_on_after(30):
                while report.get("requests") != 2:  # the log writes in batches: wait for both rows
                    await trio.sleep(0.1)
                    report = (await client.get("/v1/daari/report", params={"since": "1h"})).json()
            metrics = (await client.get("/metrics")).text
    assert ok.status_code == 200
    assert (report["requests"], report["answered"], report["errors"], report["abandoned"]) == (2, 1, 0, 1)
    assert "daari_abandoned_total{" in metrics and 'code="client_disconnected"' not in metrics
