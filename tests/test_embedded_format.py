"""The real embedded model (L3) on aider's commit prompt and Claude Code's title call, with a fake
frontier (L6) on loopback: each answer either meets the format its prompt stated or escalates (issue 19)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from daari.eval.judge_set import parse_request
from daari.task_types import MODEL_TASK_TYPES
from daari.trust.format_check import format_violations
from daari.trust.stated_format import read_stated_format
from evals.judge import judge_prompts as jp
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

FRONTIER_COMMIT = "feat: retry fetch_json on connection errors"
FRONTIER_TITLE = "Fix flaky upload retry test on CI"


def text_of(body: dict[str, Any]) -> str:
    if "choices" in body:
        return str(body["choices"][0]["message"]["content"])
    return "".join(block["text"] for block in body["content"] if block["type"] == "text")


def meets_its_format_or_escalated(prompt: dict[str, Any], body: dict[str, Any], frontier_answer: str) -> None:
    meta = body["daari_meta"]
    answer = text_of(body)
    if meta["tier"] == "L3":
        stated = read_stated_format(parse_request(prompt))
        assert format_violations(answer, stated) == (), answer  # accepted locally: it meets its format
        assert meta["attempts"][0]["outcome"] == "accepted"
    else:
        assert (meta["tier"], meta["escalated_from"], answer) == ("L6", "L3", frontier_answer)
        assert meta["attempts"][0]["outcome"] == "low_confidence"


async def test_aider_commit_and_a_claude_code_title_meet_their_format_or_escalate(tmp_path: Path) -> None:
    l6 = FakeOpenAI()
    commit, title = jp.aider_commit("http-retry"), jp.claude_title(jp.CONVERSATIONS["flaky-test"])
    async with serve_app(l6) as u6:
        # max_tokens: aider sends none, so the tier's default applies; 48 keeps a runaway answer short here.
        # routing.l3_task_types: by default generate_small skips the embedded L3 (docs/routing.md, "Which task types
        # start at L3"); a user may put it back, and then the judge below is what keeps a bad answer out.
        config = make_config(tmp_path, tiers={"L3": {"executor": "embedded", "max_tokens": 48},
                                              "L6": upstream_tier("openai", u6 + "/v1")}, frontier={"enabled": True},
                             routing={"l3_task_types": list(MODEL_TASK_TYPES)})
        async with daari_server(config) as server, \
                httpx.AsyncClient(base_url=server.url, timeout=httpx.Timeout(600)) as client:
            l6.reply = FRONTIER_COMMIT
            commit_body = (await client.post("/v1/chat/completions", json=commit["body"])).json()
            l6.reply = FRONTIER_TITLE
            title_body = (await client.post("/v1/messages", json={**title["body"], "max_tokens": 48})).json()
    meets_its_format_or_escalated(commit, commit_body, FRONTIER_COMMIT)
    meets_its_format_or_escalated(title, title_body, FRONTIER_TITLE)
