"""Which task types start at L3: the default embedded model's hand-labeled answers (evals/judge/qwen_labeled.jsonl)
scored per task type, the figures pinned, and daari's default routing following them, through a running daari
(daari/routing/l3_default.py, docs/routing.md "Which task types start at L3")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from daari import task_types as tt
from daari.config import ConfidenceConfig, config_from_dict
from daari.errors import ConfigError
from daari.eval.judge_by_task_type import (
    L3,
    MAX_BAD_ACCEPTED,
    MIN_ANSWERS,
    MIN_GOOD_SHARE,
    NOT_L3,
    TOO_FEW,
    GroupFigures,
    grouped,
    task_type_of,
    verdict,
)
from daari.eval.judge_eval import judge_all, rule_sets
from daari.eval.judge_set import DEFAULT_DIR, load_answers, load_prompts, parse_request
from daari.eval.routing_eval import DEFAULT_PROMPTS
from daari.eval.routing_eval import load_prompts as load_golden
from daari.routing.classifier import classify
from daari.routing.l3_default import L3_TASK_TYPES, l3_default, l3_task_types
from evals.judge.build_qwen_set import LABELED_BY
from evals.judge.build_qwen_set import rows as built_rows
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

QWEN = "qwen_labeled.jsonl"
PROMPTS = load_prompts()
GOLDEN = {p["id"]: p for p in load_golden(DEFAULT_PROMPTS)}


@pytest.fixture(scope="module")
def by_type() -> dict[str, GroupFigures]:
    confidence = ConfidenceConfig()
    judged = judge_all(load_answers(filename=QWEN), confidence)
    return {group.name: group for group in grouped(judged, rule_sets(confidence)[2].accepts, task_type_of)}


def test_the_qwen_set_is_every_prompt_answered_once_and_labeled_by_hand() -> None:
    answers = load_answers(filename=QWEN)
    rows = [json.loads(line) for line in (DEFAULT_DIR / QWEN).read_text().splitlines()]
    assert sorted(a.prompt_id for a in answers) == sorted(PROMPTS)
    assert {r["model"] for r in rows} == {"Qwen2.5-Coder-0.5B-Instruct"} and {r["labeled_by"] for r in rows} == {
        LABELED_BY}
    assert sum(a.good for a in answers) == 33 and sum(not a.format_ok for a in answers) == 38
    assert all(a.format_ok for a in answers if a.good)
    assert built_rows() == rows  # qwen_labeled.jsonl is what build_qwen_set.py writes from qwen_answers.jsonl


def test_pinned_figures_per_task_type(by_type: dict[str, GroupFigures]) -> None:
    # (answers, good, accepted by L3's judge, bad among accepted, good rejected); generate_small was (92, 28, 45,
    # 25, 8) before `asks_back` (two of its bad answers ask the question back)
    assert {name: (g.answers, g.good, g.accepted, g.bad_accepted, g.good_rejected) for name, g in by_type.items()} == {
        "classify": (1, 0, 1, 1, 0), "extract": (1, 1, 1, 0, 0), "generate_small": (92, 28, 43, 23, 8),
        "transform": (5, 4, 4, 0, 0)}
    assert {name: verdict(g) for name, g in by_type.items()} == {
        "classify": TOO_FEW, "extract": TOO_FEW, "generate_small": NOT_L3, "transform": TOO_FEW}


def test_the_default_routing_follows_the_table(by_type: dict[str, GroupFigures]) -> None:
    for name, group in by_type.items():
        # A type the evidence rules out is not at L3; one with too few answers keeps the rules' L3.
        assert (name in L3_TASK_TYPES) == (verdict(group) != NOT_L3), name
    # The types the set has no answer of (agent_turn, generate_large) keep what their size rules say.
    assert set(tt.MODEL_TASK_TYPES) - set(by_type) <= L3_TASK_TYPES
    assert tt.GENERATE_SMALL not in L3_TASK_TYPES


@pytest.mark.parametrize(("answers", "good", "accepted", "bad_accepted", "expected"), [
    (MIN_ANSWERS - 1, MIN_ANSWERS - 1, MIN_ANSWERS - 1, 0, TOO_FEW),  # perfect, but too few to say
    (40, 36, 36, 0, L3),  # 90% good, 0 of 36 accepted bad: upper bound 9.6%
    (40, 36, 36, 3, NOT_L3),  # 3 of 36 accepted bad: upper bound 22% > 20%
    (40, 19, 19, 0, NOT_L3),  # 47.5% good: below half
])
def test_the_rule(answers: int, good: int, accepted: int, bad_accepted: int, expected: str) -> None:
    group = GroupFigures("t", answers, good, accepted, bad_accepted, good_rejected=good - (accepted - bad_accepted))
    assert verdict(group) == expected
    assert MIN_GOOD_SHARE == 0.5 and MAX_BAD_ACCEPTED == 0.2  # the bars docs/routing.md states


def chat(prompt_id: str, **extra: Any) -> dict[str, Any]:
    return {**PROMPTS[prompt_id]["body"], "model": "daari", **extra}


async def test_through_daari_a_commit_message_skips_the_embedded_l3_and_a_probe_does_not(tmp_path: Path) -> None:
    l4 = FakeOllama()
    async with serve_app(l4) as u4:
        tiers = {"L3": {"executor": "embedded"}, "L4": upstream_tier("ollama", u4, "good")}
        config = make_config(tmp_path, tiers=tiers)
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            commit = (await client.post("/v1/chat/completions", json=chat("aider-commit-readme-typo"))).json()
            quota = GOLDEN["GP-23"]  # Claude Code's quota probe: max_tokens 1
            probe = await client.post("/v1/messages", json={"model": "daari", "messages": quota["messages"],
                                                            "max_tokens": quota["max_tokens"]})
    meta = commit["daari_meta"]  # generate_small: the table rules the embedded model out
    assert (meta["task_type"], meta["rule_id"], meta["ceiling"]) == ("generate_small", "R-A3", "L4")
    assert [a["tier"] for a in meta["attempts"]] == ["L4"] and len(l4.requests) == 1
    meta = probe.json()["daari_meta"]  # a probe's answer is never read: it stays on the cheapest tier
    assert probe.status_code == 200 and (meta["rule_id"], meta["tier"]) == ("R-C1", "L3")


async def test_an_upstream_l3_is_not_judged_by_the_embedded_models_figures(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        tiers = {"L3": upstream_tier("openai", u3 + "/v1", "good"), "L4": upstream_tier("ollama", u4, "good")}
        async with daari_server(make_config(tmp_path, tiers=tiers)) as server, \
                httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            commit = (await client.post("/v1/chat/completions", json=chat("aider-commit-readme-typo"))).json()
    assert commit["daari_meta"]["ceiling"] == "L3" and commit["daari_meta"]["attempts"][0]["tier"] == "L3"


def test_which_types_may_start_at_l3() -> None:
    assert l3_task_types(None, "embedded") == L3_TASK_TYPES
    assert l3_task_types(None, "ollama") == set(tt.MODEL_TASK_TYPES) and l3_task_types(None, None) == set(
        tt.MODEL_TASK_TYPES)
    assert l3_task_types(["generate_small"], "embedded") == {"generate_small"}  # routing.l3_task_types wins
    translate = classify(parse_request(PROMPTS["routine-translate-de"]))
    commit = classify(parse_request(PROMPTS["aider-commit-readme-typo"]))
    assert (translate.task_type, l3_default(translate).ceiling) == ("transform", "L3")  # too few answers: kept
    assert (commit.ceiling, l3_default(commit).ceiling) == ("L3", "L4")
    assert l3_default(commit, l3_task_types(["generate_small"], "embedded")).ceiling == "L3"


def test_an_unknown_task_type_in_routing_l3_task_types_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="routing.l3_task_types"):
        config_from_dict({"data_dir": str(tmp_path), "routing": {"l3_task_types": ["titles"]}})


def test_daari_eval_judge_by_task_type_command() -> None:
    result = subprocess.run([sys.executable, "-m", "daari", "eval", "judge", "--answers", QWEN, "--by-task-type"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    line = next(row for row in result.stdout.splitlines() if row.strip().startswith("generate_small  "))
    assert "28/92" in line and "43/92" in line and "23/43" in line and line.endswith(NOT_L3)
