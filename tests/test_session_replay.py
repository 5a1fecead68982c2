"""A 20-request Claude Code session replayed through daari against a provider fake that applies Anthropic's
prompt-caching rules (tests/fakes/anthropic_rules.py): the prefix daari forwards stays byte-stable on requests
2-20 and most input tokens are read from the provider's cache; the report shows the share per session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import trio

from daari.protocol import anthropic_wire
from daari.protocol.tokens import estimate_request_tokens
from daari.sessions.count import calibrated_count
from daari.sessions.identity import session_key
from tests.claude_session import ClaudeCodeSession, play_turn
from tests.fakes.anthropic_rules import RulesAnthropic, count_tokens
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config

TURNS = 20


def config_for(tmp_path: Path, upstream: str, **anthropic: Any) -> Any:
    return make_config(tmp_path, tiers={"L6": {"executor": "anthropic", "base_url": upstream, **anthropic}},
                       frontier={"enabled": True})


def read_share(fake: RulesAnthropic) -> float:
    answered = [s.usage for s in fake.served if s.status == 200]
    read = sum(u["cache_read_input_tokens"] for u in answered)
    total = sum(u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] + u["input_tokens"] for u in answered)
    return read / total


async def replay(client: httpx.AsyncClient, session: ClaudeCodeSession) -> list[httpx.Response]:
    return [await play_turn(client, session) for _ in range(TURNS)]


async def report(client: httpx.AsyncClient, requests: int) -> dict[str, Any]:
    """daari's report once the decision log holds every request (its writer flushes every 0.25 s)."""
    with trio.fail_after(20):
        while True:
            found: dict[str, Any] = (await client.get("/v1/daari/report?since=1h")).json()
            if found["requests"] >= requests:
                return found
            await trio.sleep(0.2)


async def test_a_claude_code_session_keeps_its_prefix_and_reads_the_cache(tmp_path: Path) -> None:
    # A third-party Anthropic-compatible provider: it caches by bytes, billing block included.
    fake = RulesAnthropic("provider-a", first_party=False)
    async with serve_app(fake) as upstream:
        async with daari_server(config_for(tmp_path, upstream)) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            replies = await replay(client, ClaudeCodeSession())
            summary = await report(client, TURNS)
    assert [r.status_code for r in replies] == [200] * TURNS
    assert {r.headers["x-daari-tier"] for r in replies} == {"L6"}
    assert len(fake.served) == TURNS and all(s.status == 200 for s in fake.served)
    # Requests 2-20 extend the previous request byte for byte up to its last breakpoint.
    assert [s.prefix_kept for s in fake.served[1:]] == [True] * (TURNS - 1)
    assert all(s.usage["cache_read_input_tokens"] > 0 for s in fake.served[1:])
    share = read_share(fake)
    assert share >= 0.8, share
    provider = summary["provider_cache"]
    assert provider["cache_read_share"] >= 0.8 and provider["sessions"] == 1
    assert abs(provider["cache_read_share"] - share) < 0.01  # daari's figure is the provider's own


async def test_the_billing_block_sent_as_is_to_a_third_party_provider_misses_every_time(tmp_path: Path) -> None:
    """Why daari strips it: kept (billing_block: keep), Claude Code's per-request block busts the prefix."""
    fake = RulesAnthropic("provider-a", first_party=False)
    async with serve_app(fake) as upstream:
        async with daari_server(config_for(tmp_path, upstream, billing_block="keep")) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            for _ in range(4):
                assert (await play_turn(client, ClaudeCodeSession())).status_code == 200
    assert all(s.usage["cache_read_input_tokens"] == 0 for s in fake.served)


async def test_anthropic_itself_gets_the_billing_block_and_still_caches(tmp_path: Path) -> None:
    fake = RulesAnthropic("anthropic", first_party=True)
    async with serve_app(fake) as upstream:
        async with daari_server(config_for(tmp_path, upstream, billing_block="keep")) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            session = ClaudeCodeSession()
            for _ in range(6):
                assert (await play_turn(client, session)).status_code == 200
    assert all(str(body["system"][0]["text"]).startswith("x-anthropic-billing-header") for body in fake.bodies)
    assert read_share(fake) > 0.5


async def test_a_provider_that_refuses_ttl_gets_it_once_then_never(tmp_path: Path) -> None:
    fake = RulesAnthropic("provider-a", first_party=False, accepts_ttl=False)
    async with serve_app(fake) as upstream:
        async with daari_server(config_for(tmp_path, upstream)) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            session = ClaudeCodeSession(ttl="1h")
            replies = [await play_turn(client, session) for _ in range(6)]
    assert [r.status_code for r in replies] == [200] * 6
    assert [s.status for s in fake.served] == [400] + [200] * 6  # refused once, resent without ttl
    assert all('"ttl"' not in str(body) for body in fake.bodies[1:])
    assert all(s.usage["cache_read_input_tokens"] > 0 for s in fake.served[2:])


async def test_count_tokens_is_the_providers_own_or_a_calibrated_estimate(tmp_path: Path) -> None:
    """With an Anthropic tier the provider counts (exact). Without one, daari's estimate calibrated by the
    session's reported usage: measured here against the provider's tokenizer, within 2% (the raw estimate is not)."""
    fake = RulesAnthropic("provider-a", first_party=False)
    async with serve_app(fake) as upstream:
        async with daari_server(config_for(tmp_path, upstream)) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            session = ClaudeCodeSession()
            errors: list[float] = []
            raw_errors: list[float] = []
            for _ in range(8):
                await play_turn(client, session)
                session.next_user_turn()
                body = session.body()
                counted = await client.post("/v1/messages/count_tokens", json=body, headers=session.headers())
                assert counted.status_code == 200 and "x-daari-estimate" not in counted.headers
                assert counted.json()["input_tokens"] == fake.counted[-1]  # the provider's own number
                store = server.parts.sessions
                request = anthropic_wire.parse_count_tokens_request(body, session.headers())
                state = store.get(session_key(request, session.headers()))
                estimate = estimate_request_tokens(request)
                truth = fake.counted[-1]
                errors.append(abs(calibrated_count(estimate, state, store.ratio) - truth) / truth)
                raw_errors.append(abs(estimate - truth) / truth)
                session.messages.pop()  # the counted turn is sent for real by the next play_turn
                session.requests -= 1
    mean = sum(errors[1:]) / len(errors[1:])
    print(f"count error calibrated: mean {mean:.4f}, max {max(errors[1:]):.4f}; raw estimate max {max(raw_errors):.4f}")
    assert mean <= 0.02 and max(errors[1:]) <= 0.03, errors  # docs/agents.md quotes these figures
    assert max(raw_errors) > 0.05  # the uncalibrated estimate would not do


def test_the_fake_tokenizer_is_not_daaris_estimate() -> None:
    assert count_tokens("def parse(buffer): return buffer.split()") != (len("def parse(buffer): return buffer.split()")
                                                                          + 3) // 4
