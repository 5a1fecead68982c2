"""Shortcut tiers (L1, L2, Lt) never answer an agent turn: a property of the pipeline, not of each tier."""

from __future__ import annotations

from pathlib import Path

import httpx

from daari.pipeline.shortcuts import SHORTCUT_ORDER, ShortcutQuery, ShortcutResult, shortcut_tiers
from daari.protocol.chat import ChatRequest, Completion
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


def test_agent_turns_get_no_shortcut_tiers() -> None:
    assert shortcut_tiers(agent_turn=False) == SHORTCUT_ORDER == ("CCS", "L1", "L2", "Lt")
    assert shortcut_tiers(agent_turn=True) == ()
    assert shortcut_tiers(agent_turn=True, registered={"L2": RuleAnswersEverything([])}) == ()
    prefix_l1 = RuleAnswersEverything([])
    prefix_l1.serves_agent_turns = True
    assert shortcut_tiers(agent_turn=True, registered={"L1": prefix_l1, "L2": RuleAnswersEverything([])}) == ("L1",)


class RuleAnswersEverything:
    name = "L2"
    serves_agent_turns = False

    def __init__(self, seen: list[ChatRequest]) -> None:
        self.seen = seen

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        self.seen.append(query.request)
        return ShortcutResult("L2", Completion(text='{"a": 1}', model="rules"), rule_id="L2-TEST",
                              task_type="rule", details={"rule_note": "test"})

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        return None


async def test_a_registered_rule_tier_answers_chat_but_never_an_agent_turn(tmp_path: Path) -> None:
    seen: list[ChatRequest] = []

    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config, {"L2": RuleAnswersEverything(seen)}) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            chat = await client.post("/v1/chat/completions", json={
                "model": "good", "messages": [{"role": "user", "content": "a: 1 as json"}]})
            tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
            agent = await client.post("/v1/chat/completions", json={
                "model": "good", "tools": tools, "messages": [{"role": "user", "content": "a: 1 as json"}]})
            history = await client.post("/v1/chat/completions", json={"model": "good", "messages": [
                {"role": "user", "content": "a: 1 as json"},
                {"role": "assistant", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "done"}]})
    assert chat.json()["daari_meta"]["tier"] == "L2"
    assert chat.json()["daari_meta"]["rule_id"] == "L2-TEST" and chat.json()["daari_meta"]["rule_note"] == "test"
    assert chat.json()["choices"][0]["message"]["content"] == '{"a": 1}'
    assert agent.json()["daari_meta"]["tier"] == "L3" and agent.json()["daari_meta"]["agent_turn"] is True
    assert history.json()["daari_meta"]["tier"] == "L3"
    assert len(seen) == 1  # the rule tier was never even asked about the two agent turns
