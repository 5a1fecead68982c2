"""Sessions: identity, call types, cache economics, hygiene rules (pure), and session affinity through a running
daari: a session warm on one tier stays there when moving would cost more than it saves, and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from daari.protocol import anthropic_wire
from daari.routing.client_calls import call_type
from daari.sessions.economics import Rates, rebuild_cost, weigh_move
from daari.sessions.hygiene import for_anthropic_upstream, safe_tool_id, signature_key, tool_key
from daari.sessions.identity import session_key
from tests.claude_session import ClaudeCodeSession, play_turn
from tests.fakes.anthropic_rules import RulesAnthropic
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config

SONNET = Rates(3.0, 15.0, 0.1, 1.25)
HAIKU = Rates(1.0, 5.0, 0.1, 1.25)


def parse(body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    return anthropic_wire.parse_messages_request({"max_tokens": 100, **body}, headers or {})


def test_session_ids_from_the_clients_signals() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    by_header = session_key(parse(body), {"x-claude-code-session-id": "s1"})
    assert by_header == session_key(parse(body), {"x-claude-code-session-id": "s1"})
    subagent = session_key(parse(body), {"x-claude-code-session-id": "s1", "x-claude-code-agent-id": "a1"})
    assert subagent != by_header  # a subagent has its own prompt, so its own provider cache
    as_json = {**body, "metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "s1"})}}
    legacy = {**body, "metadata": {"user_id": "user_abc_account_x_session_s1"}}
    assert session_key(parse(as_json), {}) == session_key(parse(legacy), {}) == by_header
    other_turn = {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"},
                                             {"role": "user", "content": "more"}]}
    assert session_key(parse(body), {}) == session_key(parse(other_turn), {})  # the stable prefix
    assert session_key(parse(body), {"session_id": "codex-1"}) != session_key(parse(body), {})


def test_claude_codes_call_types() -> None:
    headers = {"user-agent": "claude-cli/2.1.197 (external, cli)", "x-app": "cli"}
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
    main = parse({"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "fix it"}], "tools": tools})
    assert call_type(main, headers) == "main"
    assert call_type(main, {**headers, "x-claude-code-agent-id": "agent-1"}) == "subagent"
    assert call_type(main, {**headers, "anthropic-beta": "claude-code-20250219,context-1m-2025-08-07"}) == \
        "long_context"
    quota = anthropic_wire.parse_messages_request(
        {"model": "claude-haiku-4-5", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}, {})
    title = parse({"model": "claude-haiku-4-5", "system": "Generate a concise title for this coding session",
                   "messages": [{"role": "user", "content": "fix the parser"}]})
    assert call_type(quota, headers) == call_type(title, headers) == "background"
    assert call_type(parse({"model": "m", "messages": [{"role": "user", "content": "hi"}]}), {}) is None


def test_moving_a_warm_session_costs_the_rebuild() -> None:
    # 40k tokens warm on Sonnet; the turn planned on a cold Haiku tier: cheaper per token, dearer in total.
    stay = weigh_move(SONNET, HAIKU, 41_000, 40_000, 500, True)
    assert stay.stay and stay.saving_usd < 0
    # A free local tier saves the whole turn, but the prefix would be rebuilt on return.
    local = weigh_move(SONNET, Rates(), 41_000, 40_000, 500, True)
    assert local.saving_usd > 0 and local.rebuild_usd == rebuild_cost(SONNET, 40_000) and local.stay
    # Little warm: moving to the free tier wins.
    assert not weigh_move(SONNET, Rates(), 41_000, 1_500, 500, True).stay


def test_thinking_hygiene_rules() -> None:
    own = {"type": "thinking", "thinking": "mine", "signature": "sig-a"}
    foreign = {"type": "thinking", "thinking": "theirs", "signature": "sig-b"}
    owners = {signature_key(own): "A", signature_key(foreign): "B", tool_key("toolu_b"): "B"}
    body = {"thinking": {"type": "enabled", "budget_tokens": 2000},
            "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
            "messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "content": [own, {"type": "text", "text": "a"}]},
                         {"role": "user", "content": "q2"},
                         {"role": "assistant", "content": [foreign, {"type": "tool_use", "id": "toolu_b",
                                                                     "name": "x", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b"}]}]}
    to_a = for_anthropic_upstream(body, "A", owners.get)
    assert to_a.dropped == 1 and to_a.thinking_off  # B's block out; the running loop's turn is B's
    assert to_a.body["messages"][1]["content"][0] is own and "thinking" not in to_a.body
    assert "context_management" not in to_a.body
    to_b = for_anthropic_upstream(body, "B", owners.get)
    assert to_b.dropped == 1 and not to_b.thinking_off and to_b.body["messages"][3]["content"][0] is foreign
    unknown = for_anthropic_upstream(body, "C", {}.get)
    assert unknown.body is body  # nothing daari can attribute: sent as the client wrote it
    assert safe_tool_id("functions.read:0") == safe_tool_id("functions.read:0") != "functions.read:0"
    assert safe_tool_id("toolu_01abc") == "toolu_01abc"


def config_for(tmp_path: Path, upstream: str, **routing: Any) -> Any:
    return make_config(tmp_path, frontier={"enabled": True}, routing=routing,
                       tiers={"L5": {"executor": "anthropic", "base_url": upstream, "model": "claude-haiku-4-5"},
                              "L6": {"executor": "anthropic", "base_url": upstream, "model": "claude-sonnet-4-6"}},
                       pricing={"tiers": {"L5": {"input_per_mtok": 1.0, "output_per_mtok": 5.0},
                                          "L6": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}})


async def session_metas(tmp_path: Path, **routing: Any) -> tuple[list[dict[str, Any]], RulesAnthropic]:
    """Four turns on the Sonnet tier, then the user switches Claude Code to Haiku (mapped to L5)."""
    fake = RulesAnthropic("one-provider", first_party=False)
    metas: list[dict[str, Any]] = []
    async with serve_app(fake) as upstream:
        async with daari_server(config_for(tmp_path, upstream, models={"claude-haiku-*": "L5"}, **routing)) as \
                server, httpx.AsyncClient(base_url=server.url) as client:
            session = ClaudeCodeSession(thinking=False)
            for turn in range(6):
                session.model = "claude-haiku-4-5" if turn >= 4 else "claude-sonnet-4-6"
                reply = await play_turn(client, session)
                assert reply.status_code == 200, reply.text
                final = [json.loads(line[6:]) for line in reply.text.splitlines()
                         if line.startswith("data: ") and '"message_delta"' in line][-1]
                metas.append(final["daari_meta"])
    return metas, fake


async def test_a_warm_session_stays_on_its_tier_when_moving_costs_more(tmp_path: Path) -> None:
    metas, fake = await session_metas(tmp_path)
    assert [m["tier"] for m in metas] == ["L6"] * 6
    assert [m["affinity"] for m in metas[:4]] == ["new", "home", "home", "home"]
    assert [m["affinity"] for m in metas[4:]] == ["stay", "stay"]
    estimate = metas[4]["affinity_estimate"]
    assert (estimate["home"], estimate["planned"]) == ("L6", "L5")
    assert estimate["saving_usd"] <= estimate["rebuild_usd"]
    assert {"tier": "L5", "outcome": "skipped_affinity", "confidence": None, "error": None} in metas[4]["attempts"]
    assert fake.served[-1].usage["cache_read_input_tokens"] > 0  # Sonnet's cache kept serving the session


async def test_without_affinity_the_switch_pays_the_cache_again(tmp_path: Path) -> None:
    metas, fake = await session_metas(tmp_path, session_affinity=False)
    assert [m["tier"] for m in metas[4:]] == ["L5", "L5"]
    assert fake.served[4].usage["cache_read_input_tokens"] == 0  # Haiku's cache is its own: cold
    assert fake.bodies[4]["model"] == "claude-haiku-4-5"


def test_the_cache_marker_walks_find_markers_at_any_depth() -> None:
    from daari.sessions.prefix import cache_ttl_s, marks_cache

    hour, five = {"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral"}
    plain = {"model": "m", "messages": [{"role": "user", "content": "cache_control and ttl in a text"}]}
    assert (cache_ttl_s(plain), marks_cache(plain)) == (300.0, False)
    top = {**plain, "cache_control": five}
    assert (cache_ttl_s(top), marks_cache(top)) == (300.0, True)
    inner = {"type": "text", "text": "x", "cache_control": hour}
    result = {"type": "tool_result", "tool_use_id": "t", "content": [inner]}
    deep = {"model": "m", "messages": [{"role": "user", "content": [result]}]}
    assert (cache_ttl_s(deep), marks_cache(deep)) == (3600.0, True)
    system = {"model": "m", "system": [{"type": "text", "text": "s", "cache_control": five}], "messages": []}
    assert (cache_ttl_s(system), marks_cache(system)) == (300.0, True)
    tools = {"model": "m", "tools": [{"name": "t", "input_schema": {}, "cache_control": hour}], "messages": []}
    assert (cache_ttl_s(tools), marks_cache(tools)) == (3600.0, True)
    elsewhere = {"model": "m", "metadata": {"cache_control": hour}, "messages": []}  # not where Anthropic reads it
    assert (cache_ttl_s(elsewhere), marks_cache(elsewhere)) == (3600.0, False)
