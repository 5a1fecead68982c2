"""Real clients' requests through a running daari (issue 7, "Routing real clients' requests"): aider's edit
request, Claude Code's side calls and quota probe, a Roo Code XML-tool turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from daari.eval.routing_eval import DEFAULT_PROMPTS, load_prompts
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

GOLDEN = {p["id"]: p for p in load_prompts(DEFAULT_PROMPTS)}


def body_of(prompt_id: str, **extra: Any) -> dict[str, Any]:
    prompt = GOLDEN[prompt_id]
    return {"model": "daari", "messages": prompt["messages"], "max_tokens": prompt.get("max_tokens", 64), **extra}


async def test_an_acknowledgement_is_low_confidence_escalates_and_is_never_cached(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "ack")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            first = (await client.post("/v1/chat/completions", json=body_of("GP-21"))).json()
            second = (await client.post("/v1/chat/completions", json=body_of("GP-21"))).json()
    meta = first["daari_meta"]
    assert meta["rule_id"] == "R-C2" and meta["ceiling"] == "L4"  # aider's SEARCH/REPLACE edit request
    assert meta["tier"] == "L3" and meta["confidence"] == 0.0  # the only tier answered with an ack
    assert meta["warning"] == "below_confidence_threshold"
    assert second["daari_meta"]["cache_hit"] is False  # never served again from L0
    assert len(l3.requests) == 2


async def test_an_edit_request_goes_to_the_tier_that_can_write_edits(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "ack"),
                                              "L4": upstream_tier("ollama", u4, "good")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            meta = (await client.post("/v1/chat/completions", json=body_of("GP-21"))).json()["daari_meta"]
    assert meta["tier"] == "L4" and l3.requests == []


async def test_side_calls_start_on_the_cheapest_tier_and_probes_never_escalate(tmp_path: Path) -> None:
    l3, l4 = FakeOpenAI(), FakeOllama()
    async with serve_app(l3) as u3, serve_app(l4) as u4:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "short"),
                                              "L4": upstream_tier("ollama", u4, "good")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            title = (await client.post("/v1/chat/completions", json=body_of("GP-22"))).json()["daari_meta"]
            quota = await client.post("/v1/messages", json=body_of("GP-23"))  # Claude Code speaks Anthropic
            again = await client.post("/v1/messages", json=body_of("GP-23"))
    # "ok" is no title: a side call starts on the cheapest tier, and one that fails the judge escalates (issue 19).
    assert (title["rule_id"], title["tier"], title["escalated_from"]) == ("R-C1", "L4", "L3")
    # L4 saw the title only; L3 the title and the probe (the probe's repeat is an L0 hit).
    assert len(l4.requests) == 1 and len(l3.requests) == 2
    quota_meta = quota.json()["daari_meta"]
    assert quota.status_code == 200 and quota_meta["rule_id"] == "R-C1" and quota_meta["tier"] == "L3"
    assert quota_meta.get("warning") is None  # a one-token probe is not judged by length
    assert again.json()["daari_meta"]["tier"] == "L0"


async def test_an_xml_tool_agent_turn_is_an_agent_turn(tmp_path: Path) -> None:
    l3 = FakeOpenAI()
    async with serve_app(l3) as u3:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "good")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            meta = (await client.post("/v1/chat/completions", json=body_of("GP-26"))).json()["daari_meta"]
    assert meta["agent_turn"] is True and meta["task_type"] == "agent_turn" and meta["rule_id"] == "R-C3"
    assert "tools" not in l3.requests[-1].body  # no tools array was invented


async def test_a_codex_turn_over_the_responses_api_is_agent_work_for_the_frontier(tmp_path: Path) -> None:
    codex = GOLDEN["GP-25"]
    shell = codex["tools"][0]["function"]
    body = {"model": "gpt-5-codex", "instructions": codex["messages"][0]["content"], "stream": False,
            "tools": [{"type": "function", "name": shell["name"], "description": shell["description"],
                       "parameters": shell["parameters"]}],
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": codex["messages"][1]["content"]}]},
                      {"type": "function_call", "call_id": "call_1", "name": "shell",
                       "arguments": json.dumps({"command": ["rg", "-n", "def total"]})},
                      {"type": "function_call_output", "call_id": "call_1",
                       "output": "src/cart.py:12:    def total(self) -> int:"}]}
    l3, l6 = FakeOpenAI(), FakeOpenAI()
    async with serve_app(l3) as u3, serve_app(l6) as u6:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", u3 + "/v1", "tools"),
                                              "L6": upstream_tier("openai", u6 + "/v1", "tools")},
                             frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            response = await client.post("/v1/responses", json=body)
    meta = response.json()["daari_meta"]
    assert response.status_code == 200, response.text
    assert (meta["task_type"], meta["rule_id"], meta["tier"]) == ("agent_turn", "R-A5", "L6")
    assert l3.requests == [] and len(l6.requests) == 1
