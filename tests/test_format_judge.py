"""The judge reads what the prompt asked for, through a running daari with fake upstreams on loopback: an
answer that breaks its stated format fails at a local tier, escalates, is never cached, and daari_meta's
attempts say which constraints it broke."""

from __future__ import annotations

from pathlib import Path

import httpx

from evals.judge import judge_prompts as jp
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.judged_tiers import ask_twice
from tests.support import daari_meta, daari_server, make_config, upstream_tier

AIDER = jp.aider_commit("http-retry")["body"]
CLAUDE_TITLE = jp.claude_title(jp.CONVERSATIONS["flaky-test"])["body"]
# What SmolLM2 answered aider's commit prompt in the issue, and a Claude Code title that copies the chat.
RUNAWAY_COMMIT = "# diffs:\n" + "#\n" * 40
ECHO_TITLE = "test_upload_retries fails about one run in five on CI, can you look"


async def test_a_commit_message_that_breaks_its_format_escalates_and_the_frontiers_is_cached(tmp_path: Path) -> None:
    asked = await ask_twice(tmp_path, "/v1/chat/completions", AIDER, l3_reply=RUNAWAY_COMMIT,
                            l6_reply="feat: retry fetch_json on connection errors")
    first, second, l3, l6 = asked.first, asked.second, asked.l3, asked.l6
    assert l6 is not None
    meta = daari_meta(first)
    assert first.json()["choices"][0]["message"]["content"] == "feat: retry fetch_json on connection errors"
    assert (meta["tier"], meta["escalated_from"]) == ("L6", "L3")
    weak, accepted = meta["attempts"]
    assert (weak["outcome"], weak["confidence"]) == ("low_confidence", 0.0)
    assert {"one_line", "prefix", "repetition"} <= set(weak["violations"])
    assert accepted["outcome"] == "accepted" and "violations" not in accepted
    assert daari_meta(second)["tier"] == "L0"  # the frontier's answer met the format: stored
    assert len(l3.requests) == len(l6.requests) == 1


async def test_with_no_tier_above_it_is_served_with_the_warning_and_never_cached(tmp_path: Path) -> None:
    # Claude Code speaks Anthropic
    asked = await ask_twice(tmp_path, "/v1/messages", CLAUDE_TITLE, l3_reply=ECHO_TITLE)
    first, second, l3 = asked.first, asked.second, asked.l3
    meta = daari_meta(first)
    assert first.json()["content"][0]["text"] == ECHO_TITLE and meta["tier"] == "L3"
    assert meta["warning"] == "below_confidence_threshold"
    assert meta["attempts"][0]["violations"] == ["word_count", "char_count", "copies_prompt"]
    assert daari_meta(second)["tier"] == "L3" and len(l3.requests) == 2  # not replayed from L0


async def test_an_answer_that_meets_its_format_stays_local(tmp_path: Path) -> None:
    l3, l6 = FakeOpenAI(), FakeOpenAI()
    l3.reply = "Fix flaky upload retry test on CI"
    async with serve_app(l3) as u3, serve_app(l6) as u6:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1"),
                                              "L6": upstream_tier("openai", u6 + "/v1")}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            meta = daari_meta(await client.post("/v1/messages", json=CLAUDE_TITLE))
    assert meta["tier"] == "L3" and meta["attempts"] == [
        {"tier": "L3", "outcome": "accepted", "confidence": 1.0, "error": None}]
    assert l6.requests == []


async def test_a_frontier_answer_that_breaks_its_format_is_served_but_not_cached(tmp_path: Path) -> None:
    l6 = FakeOpenAI()
    l6.reply = "Here is a commit message:\n\nfeat: retry fetch_json on connection errors"
    async with serve_app(l6) as u6:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", u6 + "/v1")}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            first = daari_meta(await client.post("/v1/chat/completions", json=AIDER))
            second = daari_meta(await client.post("/v1/chat/completions", json=AIDER))
    assert first["tier"] == "L6" and first.get("warning") is None  # trusted: nothing above it
    assert first["attempts"][0]["violations"] == ["one_line", "prefix", "extra_text"]
    assert second["tier"] == "L6" and len(l6.requests) == 2
