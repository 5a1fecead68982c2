"""`daari report`: its figures match a decision log seeded with known rows; --json, the table, --plot."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from daari.observe.decision_log import DecisionLogStore
from daari.observe.report import parse_since, percentile, summarize
from tests.support import daari_server, make_config


def row(index: int, tier: str | None, latency: float, **extra: Any) -> dict[str, Any]:
    return {"request_id": f"r{index}", "time": time.time() - 60 + index, "tier": tier, "latency_ms": latency,
            "cache": "hit" if tier == "L0" else "miss", "protocol": "openai", "client": "aider",
            "task_type": "generate_small", "cost_usd": 0.0, "cost_l6_usd": 0.01, "status": 200, **extra}


SEEDED = [
    row(0, "L0", 1.0), row(1, "L0", 3.0), row(2, "L0", 2.0),
    row(3, "L1", 20.0, verdict="accepted", similarity=0.93),
    row(4, "L3", 400.0, verdict="rejected", similarity=0.88, task_type="classify"),
    row(5, "L3", 600.0, client="claude-code"),
    row(6, "L6", 2000.0, escalated_from="L3", cost_usd=0.01, protocol="anthropic", client="claude-code"),
    row(7, None, 5.0, error="invalid_request", status=400, cache="off"),
]


def seed(data_dir: Path, rows: list[dict[str, Any]]) -> None:
    store = DecisionLogStore(data_dir / "decisions.sqlite")
    store.insert(rows)
    store.close()


def test_the_figures_of_a_known_log() -> None:
    report = summarize(SEEDED)
    assert (report["requests"], report["answered"], report["errors"]) == (8, 7, 1)
    assert list(report["tiers"]) == ["L0", "L1", "L3", "L6"]
    assert report["tiers"]["L0"] == {"requests": 3, "share": round(3 / 7, 4), "p50_ms": 2.0, "p95_ms": 3.0}
    assert report["tiers"]["L3"]["p50_ms"] == 400.0 and report["tiers"]["L3"]["p95_ms"] == 600.0
    assert report["cache"]["L0"] == {"lookups": 7, "hits": 3, "hit_rate": round(3 / 7, 4)}
    assert report["cache"]["L1"] == {"lookups": 2, "hits": 1, "hit_rate": 0.5}
    assert report["false_hits_avoided"] == 1
    assert report["escalation_rate"] == round(1 / 7, 4)
    assert report["cost"] == {"actual_usd": 0.01, "all_l6_usd": 0.07, "saved_usd": 0.06}
    assert report["top_task_types"][0] == ("generate_small", 6)
    assert dict(report["top_clients"]) == {"aider": 6, "claude-code": 2}


def test_an_l1_lookup_is_a_hit_a_judged_candidate_or_a_miss() -> None:
    """L1's hit rate counts every request L1 looked up (daari_meta.l1 "miss" included), not the skipped ones."""
    rows = [row(0, "L1", 20.0, verdict="accepted", similarity=0.93),
            row(1, "L3", 400.0, l1="rejected", verdict="rejected", similarity=0.88),
            row(2, "L3", 500.0, l1="miss"), row(3, "L3", 500.0, l1="miss"),
            row(4, "L3", 450.0, l1="skipped_loading"), row(5, "L3", 450.0, l1="unavailable"),
            row(6, "L3", 450.0)]  # L1 not asked (a row from before the column, or L1 off)
    assert summarize(rows)["cache"]["L1"] == {"lookups": 4, "hits": 1, "hit_rate": 0.25}


def test_percentiles_and_periods() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([float(v) for v in range(1, 101)], 95) == 95.0
    assert parse_since("24h") == 86400 and parse_since("30m") == 1800 and parse_since("7d") == 604800
    with pytest.raises(ValueError, match="--since"):
        parse_since("yesterday")


def run_report(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "daari", "report", "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, timeout=120, cwd=data_dir)


def test_daari_report_json_and_table_read_the_log(tmp_path: Path) -> None:
    seed(tmp_path, [*SEEDED, row(99, "L3", 1.0, **{"time": time.time() - 3 * 86400})])  # outside 24h
    as_json = run_report(tmp_path, "--json")
    table = run_report(tmp_path, "--since", "24h")
    older = json.loads(run_report(tmp_path, "--json", "--since", "7d").stdout)
    assert as_json.returncode == 0, as_json.stderr
    figures = json.loads(as_json.stdout)
    assert figures["requests"] == 8 and figures["tiers"]["L6"]["requests"] == 1 and older["requests"] == 9
    assert figures["cost"]["saved_usd"] == 0.06
    assert "L0 hit rate      42.9% (3/7)" in table.stdout and "false hits avoided 1" in table.stdout
    assert "saved $0.0600" in table.stdout


def test_daari_report_plot_draws_a_png(tmp_path: Path) -> None:
    seed(tmp_path, SEEDED)
    plot = tmp_path / "report.png"
    result = run_report(tmp_path, "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    data = plot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_a_bad_period_is_a_one_line_error(tmp_path: Path) -> None:
    result = run_report(tmp_path, "--since", "soon")
    assert result.returncode == 2 and "--since" in result.stderr and "Traceback" not in result.stderr


async def test_the_report_endpoint_serves_the_same_figures(tmp_path: Path) -> None:
    seed(tmp_path / "data", SEEDED)
    async with daari_server(make_config(tmp_path, log={"decisions": True})) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        hour = (await client.get("/v1/daari/report", params={"since": "1h"})).json()
        bad = await client.get("/v1/daari/report", params={"since": "later"})
    assert hour["requests"] == 8 and hour["tiers"]["L0"]["p50_ms"] == 2.0 and hour["since"] == "1h"
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "since"
