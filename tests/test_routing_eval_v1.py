"""`daari eval routing --mode v1` against a real daari with escalation tiers: the v1 tier table holds
wherever the tiers it names exist (L1 is a later issue; Lt runs with tools enabled on a scratch repo)."""

from __future__ import annotations

from pathlib import Path

from daari.eval.routing_eval import format_report, run_routing_eval
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier
from tests.tool_sandbox import make_repo

BUILT_TIERS = {"L0", "L2", "Lt", "L3", "L4", "L6"}


def test_v1_tiers_with_escalation_enabled(tmp_path: Path) -> None:
    with serve_app_in_thread(FakeOpenAI()) as local, serve_app_in_thread(FakeOllama()) as ollama, \
            serve_app_in_thread(FakeOpenAI()) as frontier:
        tiers = {"L3": upstream_tier("openai", local + "/v1", "good"),
                 "L4": upstream_tier("ollama", ollama, "good"),
                 "L6": upstream_tier("openai", frontier + "/v1", "good")}
        repo = make_repo(tmp_path / "repo")  # Lt answers "git status" there
        config = make_config(tmp_path, tiers=tiers, frontier={"enabled": True},
                             tools={"enabled": True, "repo_root": str(repo)})
        with daari_in_thread(config) as server:
            report = run_routing_eval(server.url, mode="v1", max_tokens=16)
    table = format_report(report)
    assert report.passed, table  # the MVP criteria still hold with escalation on
    checked = [r for r in report.results if r.expected_v1 in BUILT_TIERS]
    assert len(checked) >= 14, table
    for result in checked:
        assert result.passed, f"{result.id}: expected {result.expected_v1}\n{table}"
    tiers_seen = {r.final.tier for r in checked}
    assert {"L0", "L2", "Lt", "L3", "L4", "L6"} <= tiers_seen, table
