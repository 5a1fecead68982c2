"""A session that moves between two providers, each of which refuses a thinking block it did not sign
(tests/fakes/anthropic_rules.py): A -> B -> A gets no error, B never sees A's blocks, and A gets its own blocks
back byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.claude_session import ClaudeCodeSession, content_from_sse, play_turn
from tests.fakes.anthropic_rules import RulesAnthropic
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config


def thinking_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] if m["role"] == "assistant" for b in m["content"]
            if b.get("type") == "thinking"]


def config_for(tmp_path: Path, a: str, b: str) -> Any:
    return make_config(tmp_path, tiers={"L5": {"executor": "anthropic", "base_url": a},
                                        "L6": {"executor": "anthropic", "base_url": b}},
                       frontier={"enabled": True})


async def run(tmp_path: Path, route: list[str]) -> tuple[list[httpx.Response], RulesAnthropic, RulesAnthropic,
                                                            ClaudeCodeSession]:
    provider_a, provider_b = RulesAnthropic("secret-a"), RulesAnthropic("secret-b")
    session = ClaudeCodeSession()
    async with serve_app(provider_a) as a, serve_app(provider_b) as b:
        async with daari_server(config_for(tmp_path, a, b)) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            replies = [await play_turn(client, session, {"x-daari-tier-override": tier}) for tier in route]
    return replies, provider_a, provider_b, session


async def test_a_to_b_to_a_inside_a_tool_loop(tmp_path: Path) -> None:
    # 1: A answers a prompt with thinking + a tool call; 2: B gets the tool result (the loop's turn is A's);
    # 3: A gets the next prompt, with its own turn-1 thinking and B's answer in the history.
    replies, a, b, session = await run(tmp_path, ["L5", "L6", "L5"])
    assert [r.status_code for r in replies] == [200, 200, 200], [r.text[:300] for r in replies]
    assert [s.status for s in a.served + b.served] == [200, 200, 200]  # no provider refused anything
    [turn_1_thinking] = thinking_blocks({"messages": session.messages[:2]})
    [to_b] = b.bodies
    assert thinking_blocks(to_b) == []  # A's block was left out ...
    assert "thinking" not in to_b  # ... and, the loop's turn being A's, thinking was off for that one request
    _, final = content_from_sse(replies[1].text)
    assert final["daari_meta"]["hygiene"] == {"tier": "L6", "dropped_thinking": 1, "thinking_off": True,
                                              "renamed_ids": 0}
    to_a = a.bodies[-1]
    assert thinking_blocks(to_a) == [turn_1_thinking]  # A's own block, byte for byte, signature and all
    assert to_a["thinking"] == {"type": "adaptive"}


async def test_a_b_a_across_turns_with_thinking_on_both_sides(tmp_path: Path) -> None:
    route = ["L5", "L5", "L6", "L5", "L5", "L6", "L6", "L5"]
    replies, a, b, session = await run(tmp_path, route)
    assert [r.status_code for r in replies] == [200] * len(route), [r.text[:300] for r in replies]
    assert all(s.status == 200 for s in a.served + b.served)
    for body in a.bodies:  # A only ever sees blocks it signed, unchanged
        assert all(block["signature"] == a.sign(block["thinking"]) for block in thinking_blocks(body))
    for body in b.bodies:
        assert all(block["signature"] == b.sign(block["thinking"]) for block in thinking_blocks(body))
    # The client's own history keeps every block; each provider saw its own ones again.
    signed_by_a = [blk for blk in thinking_blocks({"messages": session.messages})
                   if blk["signature"] == a.sign(blk["thinking"])]
    assert len(signed_by_a) >= 3 and thinking_blocks(a.bodies[-1]) == signed_by_a
    assert any(thinking_blocks(body) for body in b.bodies[1:])  # B got its own back on its second turn


async def test_without_daaris_record_a_refused_signature_is_retried_without_thinking(tmp_path: Path) -> None:
    """A session daari never saw (history from another proxy, or a restart): B refuses A's signature once, daari
    sends the request again without the blocks, and the turn is answered."""
    provider_a, provider_b = RulesAnthropic("secret-a"), RulesAnthropic("secret-b")
    session = ClaudeCodeSession()
    session.next_user_turn()
    thought = "I should list the files first."
    session.answered([{"type": "thinking", "thinking": thought, "signature": provider_a.sign(thought)},
                      {"type": "text", "text": "Here they are."}])
    async with serve_app(provider_a) as a, serve_app(provider_b) as b:
        async with daari_server(config_for(tmp_path, a, b)) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            reply = await play_turn(client, session, {"x-daari-tier-override": "L6"})
    assert reply.status_code == 200, reply.text
    assert [s.status for s in provider_b.served] == [400, 200]
    assert thinking_blocks(provider_b.bodies[-1]) == []
