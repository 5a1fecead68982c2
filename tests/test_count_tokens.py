"""count_tokens through a running daari: an Anthropic tier's upstream counts (Claude Code's context meter),
with the headers and key rules of messages; daari's estimate, marked `x-daari-estimate: true`, otherwise."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

CLIENT_KEY = "sk-ant-client-secret-0123456789"
CONFIG_KEY = "sk-ant-config-secret-9876543210"
SYSTEM = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli;"},
          {"type": "text", "text": "You are Claude Code."}]
BODY: dict[str, Any] = {
    "model": "claude-sonnet-4-6", "system": SYSTEM,
    "messages": [{"role": "user", "content": "count these words " * 30},
                 {"role": "system", "content": "The user switched to plan mode."}],
    "tools": [{"name": "Read", "description": "read a file",
               "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
}
CLAUDE_HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "mid-conversation-system-2026-04-07",
                  "x-app": "cli", "user-agent": "claude-cli/2.1.197 (external, sdk-cli)",
                  "x-claude-code-session-id": "sess-1", "x-stainless-lang": "js", "x-daari-token": "t0k"}


@asynccontextmanager
async def running(tmp_path: Path,
                  tiers: dict[str, dict[str, Any]]) -> AsyncIterator[tuple[httpx.AsyncClient, FakeAnthropic]]:
    fake = FakeAnthropic()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={name: {**tier, "base_url": tier.get("base_url") or upstream}
                                              for name, tier in tiers.items()})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            yield client, fake


def anthropic_tier(**extra: Any) -> dict[str, Any]:
    return {"executor": "anthropic", **extra}


async def test_the_anthropic_upstream_counts_with_the_clients_headers(tmp_path: Path) -> None:
    # billing_block keep: the fake stands for Anthropic's own API here (elsewhere daari strips the block)
    async with running(tmp_path, {"L3": anthropic_tier(forward_client_key=True, billing_block="keep")}) as (
            client, fake):
        answer = await client.post("/v1/messages/count_tokens?beta=true", json=BODY,
                                   headers={**CLAUDE_HEADERS, "x-api-key": CLIENT_KEY})
    assert answer.status_code == 200
    assert "x-daari-estimate" not in answer.headers
    [sent] = fake.requests
    assert sent.path == "/v1/messages/count_tokens" and sent.query == "beta=true"
    assert sent.body == BODY  # the system role, the billing block and the tools reach the upstream unchanged
    assert answer.json() == {"input_tokens": FakeAnthropic()._input_tokens(BODY)}  # the upstream's own number
    assert {k: sent.headers.get(k) for k in CLAUDE_HEADERS} == {
        **{k: v for k, v in CLAUDE_HEADERS.items() if k not in ("x-stainless-lang", "x-daari-token")},
        "x-stainless-lang": None, "x-daari-token": None}  # the allowlist only, never daari's own token
    assert sent.headers["x-api-key"] == CLIENT_KEY and "authorization" not in sent.headers


async def test_configured_key_and_model_are_the_tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TEST_ANTHROPIC_KEY", CONFIG_KEY)
    tier = anthropic_tier(api_key_env="DAARI_TEST_ANTHROPIC_KEY", model="claude-haiku-4-5")
    async with running(tmp_path, {"L3": tier}) as (client, fake):
        answer = await client.post("/v1/messages/count_tokens", json=BODY,
                                   headers={**CLAUDE_HEADERS, "x-api-key": CLIENT_KEY})
    assert answer.status_code == 200 and "x-daari-estimate" not in answer.headers
    [sent] = fake.requests
    assert sent.headers["x-api-key"] == CONFIG_KEY  # never the client's key without forward_client_key
    assert sent.body["model"] == "claude-haiku-4-5"


async def test_a_keyless_request_to_a_forwarding_tier_is_a_401(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TEST_ANTHROPIC_KEY", CONFIG_KEY)
    tier = anthropic_tier(forward_client_key=True, api_key_env="DAARI_TEST_ANTHROPIC_KEY")
    async with running(tmp_path, {"L3": tier}) as (client, fake):
        answer = await client.post("/v1/messages/count_tokens", json=BODY, headers=CLAUDE_HEADERS)
    assert answer.status_code == 401
    assert answer.json()["type"] == "error" and answer.json()["error"]["type"] == "authentication_error"
    assert fake.requests == []  # the configured key was not spent for it


@pytest.mark.parametrize(("model", "status", "kind", "text"), [
    ("refuse", 400, "invalid_request_error", "prompt is too long"),
    ("unauthorized", 401, "authentication_error", "invalid x-api-key"),
])
async def test_the_upstreams_4xx_about_the_request_reaches_the_client(tmp_path: Path, model: str, status: int,
                                                                      kind: str, text: str) -> None:
    async with running(tmp_path, {"L3": anthropic_tier(forward_client_key=True)}) as (client, fake):
        answer = await client.post("/v1/messages/count_tokens", json={**BODY, "model": model},
                                   headers={**CLAUDE_HEADERS, "x-api-key": CLIENT_KEY})
    assert answer.status_code == status
    assert answer.json()["type"] == "error"
    assert answer.json()["error"]["type"] == kind and text in answer.json()["error"]["message"]
    assert CLIENT_KEY not in answer.text  # the upstream echoed the key: scrubbed
    assert len(fake.requests) == 1


@pytest.mark.parametrize("model", ["error529", "nocount"])
async def test_an_upstream_that_cannot_count_gives_the_estimate(tmp_path: Path, model: str) -> None:
    async with running(tmp_path, {"L3": anthropic_tier()}) as (client, fake):
        answer = await client.post("/v1/messages/count_tokens", json={**BODY, "model": model},
                                   headers=CLAUDE_HEADERS)
    assert answer.status_code == 200
    assert answer.headers["x-daari-estimate"] == "true"
    assert set(answer.json()) == {"input_tokens"} and answer.json()["input_tokens"] > 0
    assert len(fake.requests) == 1


async def test_an_unreachable_upstream_gives_the_estimate(tmp_path: Path) -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with running(tmp_path, {"L3": anthropic_tier(base_url=dead)}) as (client, _):
        answer = await client.post("/v1/messages/count_tokens", json=BODY, headers=CLAUDE_HEADERS)
    assert answer.status_code == 200 and answer.headers["x-daari-estimate"] == "true"
    assert answer.json()["input_tokens"] > 0


async def test_without_an_anthropic_tier_daari_estimates(tmp_path: Path) -> None:
    openai_fake = FakeOpenAI()
    async with serve_app(openai_fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            answer = await client.post("/v1/messages/count_tokens", json=BODY, headers=CLAUDE_HEADERS)
            bad = await client.post("/v1/messages/count_tokens", json={"model": "m"}, headers=CLAUDE_HEADERS)
    assert answer.status_code == 200 and answer.headers["x-daari-estimate"] == "true"
    assert answer.json()["input_tokens"] > 0
    assert openai_fake.requests == []
    assert bad.status_code == 400 and bad.json()["error"]["message"] == "messages: Field required"


async def test_the_first_anthropic_tier_in_escalation_order_counts(tmp_path: Path) -> None:
    openai_fake = FakeOpenAI()
    async with serve_app(openai_fake) as openai_url:
        tiers = {"L3": upstream_tier("openai", openai_url + "/v1"), "L5": anthropic_tier()}
        async with running(tmp_path, tiers) as (client, fake):
            answer = await client.post("/v1/messages/count_tokens", json=BODY, headers=CLAUDE_HEADERS)
    assert answer.status_code == 200 and "x-daari-estimate" not in answer.headers
    assert [r.path for r in fake.requests] == ["/v1/messages/count_tokens"]
    assert openai_fake.requests == []
