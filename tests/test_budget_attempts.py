"""Every paid attempt counted once (docs/budget.md, "What is counted"), through a running daari with fake upstreams on
loopback: a priced answer judged too weak and escalated past is billed by its provider, so spend.sqlite has it beside
the served one; a weak answer served after all (nothing above did better) is counted once, not again when served."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daari.config import PriceConfig, PricingConfig
from daari.pricing import usage_cost
from daari.protocol.chat import Usage
from daari.protocol.events import Event, Finish, NativeEvent, TextDelta
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier
from tests.test_budget_server import spend_rows

# Different prices per tier, so each row's cost says which usage it was counted from.
PRICES = {"tiers": {"L4": {"input_per_mtok": 100.0, "output_per_mtok": 700.0},
                    "L5": {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0},
                    "L6": {"input_per_mtok": 3000.0, "output_per_mtok": 5000.0}}}
PRICING = PricingConfig(tiers={tier: PriceConfig(**price) for tier, price in PRICES["tiers"].items()})
QUESTION = "what does a git rebase do?"


def cost(tier: str, prompt: int, output: int) -> float:
    return usage_cost(PRICING, tier, None, Usage(prompt_tokens=prompt, completion_tokens=output))


def openai_cost(tier: str, usage: dict[str, int]) -> float:
    return cost(tier, usage["prompt_tokens"], usage["completion_tokens"])


def by_tier(data_dir: Path) -> dict[str, tuple[float, int]]:
    rows = spend_rows(data_dir)
    assert len({tier for tier, _, _ in rows}) == len(rows)  # one row per tier: one day, project, client, session
    return {tier: (usd, calls) for tier, usd, calls in rows}


async def ask(client: httpx.AsyncClient, model: str, stream: bool) -> dict[str, Any]:
    """The answer's daari_meta (a stream's, from its last data event)."""
    body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": QUESTION}]}
    if not stream:
        response = await client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        meta: dict[str, Any] = response.json()["daari_meta"]
        return meta
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        events = [json.loads(line[6:]) async for line in response.aiter_lines()
                  if line.startswith("data: ") and line[6:] != "[DONE]"]
    return next(event["daari_meta"] for event in reversed(events) if "daari_meta" in event)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_weak_priced_answer_escalated_past_is_counted(tmp_path: Path, stream: bool) -> None:
    """L5 refuses (a weak answer: escalated), L6 answers: the provider billed both, so both are spend."""
    l5, l6 = FakeOpenAI(), FakeOpenAI()
    async with serve_app(l5) as u5, serve_app(l6) as u6:
        config = make_config(tmp_path, tiers={"L5": upstream_tier("openai", u5 + "/v1", "refuse"),
                                              "L6": upstream_tier("openai", u6 + "/v1", "good")},
                             frontier={"enabled": True}, pricing=PRICES, routing={"models": {"gpt-mid": "L5"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            meta = await ask(client, "gpt-mid", stream)
            state = (await client.get("/v1/daari/budget")).json()
    assert [(a["tier"], a["outcome"]) for a in meta["attempts"]] == [("L5", "low_confidence"), ("L6", "accepted")]
    [l5_usage], [l6_usage] = l5.usages, l6.usages
    assert l5_usage != l6_usage  # a refusal and an answer: each row's figure is its own
    expected = {"L5": (pytest.approx(openai_cost("L5", l5_usage)), 1),
                "L6": (pytest.approx(openai_cost("L6", l6_usage)), 1)}
    assert by_tier(tmp_path / "data") == expected
    assert state["spent_usd"]["day"]["all"][""] == pytest.approx(
        openai_cost("L5", l5_usage) + openai_cost("L6", l6_usage))


async def test_a_weak_answer_from_the_last_tier_is_counted_once(tmp_path: Path) -> None:
    """Nothing above L5: its weak answer is served with the warning, and counted once."""
    l5 = FakeOpenAI()
    async with serve_app(l5) as u5:
        config = make_config(tmp_path, tiers={"L5": upstream_tier("openai", u5 + "/v1", "refuse")},
                             pricing=PRICES, routing={"models": {"gpt-mid": "L5"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            meta = await ask(client, "gpt-mid", False)
    assert meta["tier"] == "L5" and meta["warning"] == "below_confidence_threshold"
    [usage] = l5.usages
    assert by_tier(tmp_path / "data") == {"L5": (pytest.approx(openai_cost("L5", usage)), 1)}


@pytest.mark.parametrize("stream", [False, True])
async def test_the_best_weak_answer_served_after_all_is_counted_once(tmp_path: Path, stream: bool) -> None:
    """L4's answer is weak (its logprobs give 0.875 under a 0.95 pass mark), L5's weaker (a refusal): daari escalated
    past L4, then serves its answer after all. L4 counted once (not again when served), L5 once. (A stream's last
    tier streams live, so its own answer is served: the same two paid calls.)"""
    l4, l5 = FakeOllama(), FakeOllama()
    async with serve_app(l4) as u4, serve_app(l5) as u5:
        config = make_config(tmp_path, tiers={"L4": upstream_tier("ollama", u4, "good"),
                                              "L5": upstream_tier("ollama", u5, "refuse")},
                             pricing=PRICES, confidence={"l4_min": 0.95}, routing={"models": {"gpt-mid": "L4"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            meta = await ask(client, "gpt-mid", stream)
    assert [(a["tier"], a["outcome"]) for a in meta["attempts"]] == [("L4", "low_confidence"), ("L5", "low_confidence")]
    assert meta["tier"] == ("L5" if stream else "L4") and meta["warning"] == "below_confidence_threshold"
    [l4_usage], [l5_usage] = l4.usages, l5.usages
    assert by_tier(tmp_path / "data") == {"L4": (pytest.approx(cost("L4", *l4_usage)), 1),
                                          "L5": (pytest.approx(cost("L5", *l5_usage)), 1)}


async def test_an_answer_the_upstream_left_unfinished_is_counted_then_escalated(tmp_path: Path) -> None:
    """L5's stream ends cleanly but without a finish (truncated): daari escalates to L6; L5 billed the prompt and what
    it generated, reported nowhere (an OpenAI stream reports usage at its end): counted from daari's estimates."""
    l5, l6 = FakeOpenAI(), FakeOpenAI()
    async with serve_app(l5) as u5, serve_app(l6) as u6:
        config = make_config(tmp_path, tiers={"L5": upstream_tier("openai", u5 + "/v1", "truncate"),
                                              "L6": upstream_tier("openai", u6 + "/v1", "good")},
                             frontier={"enabled": True}, pricing=PRICES, routing={"models": {"gpt-mid": "L5"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            meta = await ask(client, "gpt-mid", True)
            metrics = (await client.get("/metrics")).text
    assert [(a["tier"], a["outcome"]) for a in meta["attempts"]] == [("L5", "failed"), ("L6", "accepted")]
    rows = by_tier(tmp_path / "data")
    [l6_usage] = l6.usages
    assert rows["L6"] == (pytest.approx(openai_cost("L6", l6_usage)), 1)
    usd, calls = rows["L5"]
    # At least the prompt (a few tokens) and the one word relayed, at L5's prices; at most ten times that.
    assert cost("L5", 5, 1) <= usd <= cost("L5", 50, 10) and calls == 1
    assert 'daari_budget_cut_off_total{source="estimated",tier="L5"} 1.0' in metrics


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_without_reported_usage_is_estimated(tmp_path: Path, stream: bool) -> None:
    """A priced upstream that reports no usage (it ignores stream_options) still costs: its answer is counted from
    daari's estimates, so a cap holds against it."""
    l6 = FakeOpenAI()
    l6.reports_usage = False
    async with serve_app(l6) as u6:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", u6 + "/v1", "good")},
                             frontier={"enabled": True}, pricing=PRICES, routing={"models": {"gpt-big": "L6"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            meta = await ask(client, "gpt-big", stream)
            metrics = (await client.get("/metrics")).text
    assert meta["tier"] == "L6" and l6.usages == []
    assert 'daari_budget_unreported_usage_total{purpose="answer",tier="L6"} 1.0' in metrics
    # "Here is a careful answer about your request: what does a git rebase do?": about 18 tokens at ~4 characters
    # each, and a prompt of a few; the bounds leave the estimates room either way.
    [(tier, usd, calls)] = spend_rows(tmp_path / "data")
    assert tier == "L6" and calls == 1 and cost("L6", 3, 8) <= usd <= cost("L6", 60, 40)


def test_a_final_count_of_nothing_is_estimated() -> None:
    from daari.budget.abandoned import usage_so_far
    from daari.protocol.events import Finish, TextDelta

    usage, source, model = usage_so_far([TextDelta("x" * 40), Finish("stop", Usage(), model="m")], 99)
    assert (usage.prompt_tokens, usage.completion_tokens, source, model) == (99, 10, "estimated", "m")


@settings(max_examples=300, deadline=None)
@given(events=st.lists(st.one_of(
    st.builds(TextDelta, st.text(max_size=9), tokens=st.integers(0, 3)),
    st.builds(Finish, st.just("stop"),
              st.builds(Usage, prompt_tokens=st.integers(0, 5), completion_tokens=st.integers(0, 5)),
              model=st.sampled_from(["", "m"])),
    st.just(NativeEvent("anthropic", "message_start", {"message": {"model": "a", "usage": {"input_tokens": 4}}})),
), max_size=12))
def test_usage_so_far_of_a_completed_answer_is_what_the_walk_over_its_events_gives(events: list[Event]) -> None:
    from daari.budget.abandoned import _walked, usage_so_far
    assert usage_so_far(events, 99) == _walked(events, 99)
