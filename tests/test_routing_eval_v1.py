"""`daari eval routing --mode v1` against a real daari: model tiers on fake upstreams, the real L1, L2 and Lt
(tools on a scratch repo, eslint and an IntelliJ wrapper as stand-in scripts), and, for the v1 verdict, a
word-overlap stand-in for L1."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from daari.eval.routing_eval import EvalReport, format_report, run_routing_eval, waiting_for
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.protocol.chat import Completion
from daari.routing.classifier import last_user_text
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier
from tests.tool_sandbox import make_repo


class WordOverlapL1:
    """Stand-in for the semantic cache: serves a query whose words mostly overlap an earlier cacheable one."""

    name, serves_agent_turns = "L1", False

    def __init__(self) -> None:
        self.seen: list[set[str]] = []

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        if query.headers.get("x-daari-no-cache") == "true":
            return None
        words = set(re.findall(r"\w+", last_user_text(query.request).lower()))
        for earlier in self.seen:
            if len(words & earlier) / len(words | earlier) >= 0.7:
                return ShortcutResult("L1", Completion(text="Use a discounted, quantity-aware cart total."),
                                      task_type="cache_hit", rule_id="L1-test")
        self.seen.append(words)
        return None

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        return None


def stand_in(tmp_path: Path, name: str) -> Path:
    """A small script in place of a tool that is not installed here (eslint, an IntelliJ wrapper)."""
    path = tmp_path / "stand-ins" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{name} ran: $DAARI_TOOL_ACTION"\n')
    path.chmod(0o755)
    return path


# What a local model that follows the prompt's stated format answers the golden prompts that state one: the
# judge reads the format (issue 19), so the fake's one-size answer would escalate them.
FORMATTED_ANSWERS = {
    "GP-22": '{"title": "Fix double coupon discount at checkout"}',
    "GP-24": '{"isNewTopic": true, "title": "Flaky payment tests"}',
    "GP-34": '{"name": "daari", "port": 8787}\n\n`name` is the service name; `port` is where it listens.',
}


def answer_formatted(body: dict[str, Any]) -> str | None:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    text = " ".join(str(m.get("content")) for m in messages)
    for marker, gp in (("sentence-case title (3-7 words)", "GP-22"), ("isNewTopic", "GP-24"),
                       ("Convert this YAML to JSON and explain each key", "GP-34")):
        if marker in text:
            return FORMATTED_ANSWERS[gp]
    return None


@contextmanager
def v1_daari(tmp_path: Path, stand_ins: bool) -> Iterator[str]:
    local_model = FakeOpenAI()
    local_model.answer_for = answer_formatted
    with serve_app_in_thread(local_model) as local, serve_app_in_thread(FakeOllama()) as ollama, \
            serve_app_in_thread(FakeOpenAI()) as frontier:
        tiers = {"L3": upstream_tier("openai", local + "/v1", "tools"),
                 "L4": upstream_tier("ollama", ollama, "good"),
                 "L6": upstream_tier("openai", frontier + "/v1", "good")}
        repo = make_repo(tmp_path / "repo")  # the real Lt answers "git status" there
        config = make_config(tmp_path, tiers=tiers, frontier={"enabled": True},
                             tools={"enabled": True, "repo_root": str(repo),
                                    "eslint": {"command": str(stand_in(tmp_path, "eslint"))},
                                    "intellij": {"command": str(stand_in(tmp_path, "idea"))}})
        # With stand-ins L1 is a word-overlap double; L2 and Lt are the real tiers.
        with daari_in_thread(config, {"L1": WordOverlapL1()} if stand_ins else None) as server:
            if not stand_ins:
                wait_for_l1(server)
            yield server.url


def wait_for_l1(server: Any) -> None:
    """L1 declines (skipped_loading) until its embedding model is loaded in the background."""
    status = server.parts.shortcuts["L1"].status
    deadline = time.monotonic() + 120
    while not status.ready and time.monotonic() < deadline:
        time.sleep(0.1)
    assert status.ready, "the L1 embedding model did not load"


def run_v1(tmp_path: Path, stand_ins: bool) -> EvalReport:
    with v1_daari(tmp_path, stand_ins) as url:
        return run_routing_eval(url, mode="v1", max_tokens=16)


def test_v1_criteria_pass_with_every_tier_v1_assumes(tmp_path: Path) -> None:
    report = run_v1(tmp_path, stand_ins=True)
    table = format_report(report)
    assert report.passed, table
    assert [r.id for r in report.results if not r.passed] == [], table
    finals = {r.id: r.final for r in report.results}
    assert finals["GP-13"].tier == "Lt" and finals["GP-13"].rule_id == "LT-05"
    assert finals["GP-10"].tier == "L6" and finals["GP-16"].tier == "L4" and finals["GP-08"].tier == "L6"
    assert finals["GP-21"].tier == "L4" and finals["GP-21"].rule_id == "R-C2"  # aider's edit request
    assert finals["GP-26"].rule_id == "R-C3" and finals["GP-23"].rule_id == "R-C1"


def test_v1_with_the_real_shortcut_tiers_names_what_still_waits(tmp_path: Path) -> None:
    report = run_v1(tmp_path, stand_ins=False)
    table = format_report(report)
    print(table)  # the note of issue 9 quotes which prompts wait for which tier
    waiting = waiting_for(report)
    # L1, L2 and Lt are built (eslint and the IntelliJ wrapper are stand-in scripts here): nothing waits.
    assert waiting == {}, table
    assert {r.id: r.final.tier for r in report.results}["GP-12"] == "L1", table
    model_rows = [r for r in report.results if not {"L1", "L2", "Lt"} & set(r.expected.split("/"))]
    assert all(r.passed for r in model_rows), table
    finals = {r.id: r.final for r in report.results}
    assert finals["GP-07"].tier == "Lt" and finals["GP-14"].tier == "L2", table
    for gp, rule in (("GP-06", "LT-01"), ("GP-07", "DEV-01"), ("GP-13", "LT-05"), ("GP-19", "LT-06")):
        assert finals[gp].tier == "Lt" and finals[gp].rule_id == rule, table
    assert finals["GP-03"].rule_id == "L2-JSON-LENIENT" and finals["GP-14"].rule_id == "L2-YAML-JSON", table
    assert report.criteria[1].passed, table  # no silent failures
    assert report.passed, table  # the spec's v1 verdict with the tiers v1 assumes, all real but the tool binaries
