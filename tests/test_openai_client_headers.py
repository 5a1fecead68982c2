"""The client's own headers through a running daari to OpenAI-compatible and Responses upstreams: Codex's
allowlisted headers arrive as sent, credentials only by the key rules, daari's own headers never, and none of
them is in the cache key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from daari.executors.lean_http import USER_AGENT
from daari.protocol.openai_headers import PASSTHROUGH_HEADERS
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

CLIENT_KEY = "sk-proj-client-secret-0123456789"
CONFIG_KEY = "sk-config-secret-9876543210abcd"
# What Codex CLI 0.171 sends with a custom model provider (codex-rs: originator + user-agent on every
# request, `version` and OpenAI-Organization/Project of the provider, OpenAI-Beta, session and turn headers).
CODEX_HEADERS = {
    "user-agent": "codex_cli_rs/0.171.0 (Ubuntu 24.4.0; x86_64) xterm-256color (codex-exec; 0.171.0)",
    "originator": "codex_exec", "version": "0.171.0", "openai-beta": "responses=experimental",
    "openai-organization": "org-example", "openai-project": "proj_example",
    "session_id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "x-session-id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    "conversation_id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "thread-id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c",
    "x-client-request-id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", "x-codex-beta-features": "unified_exec",
    "x-codex-turn-metadata": '{"turn_id":"t-1","sandbox":"seccomp"}', "x-openai-subagent": "review",
}
# Never forwarded: daari's own headers, cookies, ChatGPT account ids, SDK telemetry.
NOT_FORWARDED = {"x-daari-no-cache": "0", "x-daari-repo": "/tmp", "cookie": "session=secret-cookie",
                 "chatgpt-account-id": "acct-secret", "x-stainless-lang": "js", "x-api-key": "sk-ant-other"}


def responses_body(text: str = "add hello.txt", **extra: Any) -> dict[str, Any]:
    return {"model": "good", "instructions": "You are a coding agent.", "store": False,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
            "prompt_cache_key": "session-1", **extra}


@asynccontextmanager
async def daari_before(tmp_path: Path, fake: Any, **tier: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_app(fake) as upstream:
        kind = "anthropic" if isinstance(fake, FakeAnthropic) else "openai"
        base = upstream if kind == "anthropic" else upstream + "/v1"
        config = make_config(tmp_path, tiers={"L3": upstream_tier(kind, base, **tier)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            yield client


def forwarded(sent: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sent.items() if k in CODEX_HEADERS}


@pytest.mark.parametrize("stream", [True, False])
async def test_codex_headers_reach_a_responses_upstream(tmp_path: Path, stream: bool) -> None:
    fake = FakeResponses()
    async with daari_before(tmp_path, fake, wire_api="responses", forward_client_key=True) as client:
        reply = await client.post("/v1/responses", json=responses_body(stream=stream),
                                  headers={**CODEX_HEADERS, **NOT_FORWARDED, "authorization": f"Bearer {CLIENT_KEY}"})
    assert reply.status_code == 200
    [sent] = fake.requests
    assert forwarded(sent.headers) == CODEX_HEADERS  # every one, byte for byte: not python-httpx's user-agent
    assert sent.headers["authorization"] == f"Bearer {CLIENT_KEY}"  # forward_client_key
    assert not set(NOT_FORWARDED) & set(sent.headers)
    assert not any(k.startswith("x-daari") for k in sent.headers)
    assert sent.headers["content-type"] == "application/json"


async def test_codex_headers_reach_a_chat_completions_upstream_with_the_tiers_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TEST_OPENAI_KEY", CONFIG_KEY)
    fake = FakeOpenAI()
    async with daari_before(tmp_path, fake, api_key_env="DAARI_TEST_OPENAI_KEY") as client:
        chat = await client.post("/v1/chat/completions", headers={
            **CODEX_HEADERS, **NOT_FORWARDED, "authorization": f"Bearer {CLIENT_KEY}"},
            json={"model": "good", "messages": [{"role": "user", "content": "explain CRDTs"}]})
        codex = await client.post("/v1/responses", json=responses_body(), headers={
            **CODEX_HEADERS, "authorization": f"Bearer {CLIENT_KEY}"})
    assert chat.status_code == 200 and codex.status_code == 200
    assert len(fake.requests) == 2
    for sent in fake.requests:  # a chat client, and a Responses client translated to chat completions
        assert forwarded(sent.headers) == CODEX_HEADERS
        assert sent.headers["authorization"] == f"Bearer {CONFIG_KEY}"  # never the client's without forwarding
        assert not set(NOT_FORWARDED) & set(sent.headers)


async def test_a_keyless_request_to_a_forwarding_tier_is_a_401_and_sends_nothing(tmp_path: Path) -> None:
    fake = FakeResponses()
    async with daari_before(tmp_path, fake, wire_api="responses", forward_client_key=True) as client:
        reply = await client.post("/v1/responses", json=responses_body(), headers=CODEX_HEADERS)
    assert reply.status_code == 401 and "forward_client_key" in reply.json()["error"]["message"]
    assert fake.requests == []


async def test_forwarded_headers_are_not_in_the_cache_key(tmp_path: Path) -> None:
    fake = FakeResponses()
    async with daari_before(tmp_path, fake, wire_api="responses") as client:
        first = await client.post("/v1/responses", json=responses_body(), headers=CODEX_HEADERS)
        other_session = {name: f"other-{value}" for name, value in CODEX_HEADERS.items()}
        second = await client.post("/v1/responses", json=responses_body(), headers=other_session)
    assert first.status_code == 200 and second.status_code == 200
    assert first.headers["x-daari-cache"] != "hit" and second.headers["x-daari-cache"] == "hit"
    assert len(fake.requests) == 1
    assert second.json()["output"] == first.json()["output"]


async def test_an_anthropic_clients_headers_do_not_go_to_an_openai_upstream(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with daari_before(tmp_path, fake) as client:
        reply = await client.post("/v1/messages", headers={
            "user-agent": "claude-cli/2.1.197 (external, sdk-cli)", "x-client-request-id": "req-claude",
            "anthropic-version": "2023-06-01"},
            json={"model": "good", "max_tokens": 50, "messages": [{"role": "user", "content": "explain raft"}]})
    assert reply.status_code == 200
    [sent] = fake.requests
    assert sent.headers["user-agent"] == USER_AGENT  # daari's own (the lean client's: a plain-http upstream)
    assert "x-client-request-id" not in sent.headers and "anthropic-version" not in sent.headers


async def test_a_codex_clients_headers_do_not_go_to_an_anthropic_upstream(tmp_path: Path) -> None:
    fake = FakeAnthropic()
    async with daari_before(tmp_path, fake) as client:
        reply = await client.post("/v1/responses", json=responses_body(), headers=CODEX_HEADERS)
    assert reply.status_code == 200
    [sent] = fake.requests
    assert sent.headers["user-agent"] == USER_AGENT
    assert not (set(CODEX_HEADERS) - {"user-agent"}) & set(sent.headers)


def test_the_allowlist_holds_no_credential_and_no_daari_header() -> None:
    assert not {"authorization", "x-api-key", "cookie", "proxy-authorization"} & set(PASSTHROUGH_HEADERS)
    assert not any(name.startswith("x-daari") for name in PASSTHROUGH_HEADERS)
    assert all(name == name.lower() for name in PASSTHROUGH_HEADERS)
