"""What Claude Code sends now, through a running daari: mid-conversation system messages, the billing block,
beta query string and headers, the upstream's own message_start, HEAD /."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

BETA = "claude-code-20250219,mid-conversation-system-2026-04-07"


def claude_code_body(cch: str = "a1b2c", user_id: str = "user_1_session_1") -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6", "max_tokens": 1024, "stream": True,
        "system": [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.197.abc; "
                                            f"cc_entrypoint=sdk-cli; cch={cch};"},
                   {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
            {"role": "system", "content": "The user switched to plan mode."},
            {"role": "user", "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]},
        ],
        "metadata": {"user_id": user_id},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    }


def claude_code_headers(session: str = "sess-1") -> dict[str, str]:
    return {"anthropic-version": "2023-06-01", "anthropic-beta": BETA, "x-app": "cli",
            "user-agent": "claude-cli/2.1.197 (external, sdk-cli)", "x-claude-code-session-id": session,
            "x-api-key": "sk-ant-client-secret", "x-stainless-lang": "js"}


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        out.append((lines["event"], json.loads(lines["data"])))
    return out


@pytest.fixture
def native(tmp_path: Path) -> Iterator[tuple[str, FakeAnthropic]]:
    fake = FakeAnthropic()
    with serve_app_in_thread(fake) as upstream:
        # billing_block keep: the fake stands for Anthropic's own API (elsewhere daari strips the block)
        config = make_config(tmp_path, tiers={"L3": upstream_tier("anthropic", upstream, billing_block="keep")})
        with daari_in_thread(config) as server:
            yield server.url, fake


def test_native_pass_through_is_unchanged_and_repeat_is_l0(native: tuple[str, FakeAnthropic]) -> None:
    url, fake = native
    body = claude_code_body()
    reply = httpx.post(url + "/v1/messages?beta=true", json=body, headers=claude_code_headers())
    assert reply.status_code == 200, reply.text
    sent = fake.requests[-1]
    assert sent.query == "beta=true"
    assert sent.body == body  # system role, billing block, metadata, cache_control, unknown fields: all as sent
    for name, value in claude_code_headers().items():
        if name in ("x-api-key", "x-stainless-lang"):
            assert name not in sent.headers  # the client's key only with forward_client_key; not allowlisted
        else:
            assert sent.headers[name] == value
    events = sse_events(reply.text)
    assert events[0][0] == "message_start"
    # The upstream's own message_start, usage and all: Claude Code's context meter reads it.
    assert events[0][1]["message"]["id"] == "msg_fake"
    assert events[0][1]["message"]["usage"]["cache_read_input_tokens"] == 0
    assert events[-2][1]["usage"] == {"output_tokens": 7} and "daari_meta" in events[-2][1]
    # Another request of the same conversation: new billing hash, session and user id. Same answer: L0.
    again = httpx.post(url + "/v1/messages?beta=true", json=claude_code_body("zz9", "user_2_session_2"),
                       headers=claude_code_headers("sess-2"))
    assert again.headers["x-daari-cache"] == "hit"
    assert len(fake.requests) == 1
    replayed = sse_events(again.text)[0][1]["message"]["usage"]
    assert {k: v for k, v in replayed.items() if k != "output_tokens"} == {
        k: v for k, v in events[0][1]["message"]["usage"].items() if k != "output_tokens"}


def test_mid_conversation_system_goes_to_openai_as_a_system_message(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            body = {**claude_code_body(), "stream": False}
            reply = httpx.post(server.url + "/v1/messages?beta=true", json=body, headers=claude_code_headers())
            assert reply.status_code == 200, reply.text
            messages = fake.requests[-1].body["messages"]
            assert [m["role"] for m in messages] == ["system", "user", "system", "user"]
            assert messages[0]["content"] == "You are Claude Code."  # no billing block
            assert messages[2]["content"] == "The user switched to plan mode."
            counted = httpx.post(server.url + "/v1/messages/count_tokens?beta=true",
                                 json={k: body[k] for k in ("model", "system", "messages")},
                                 headers=claude_code_headers())
            assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
            assert httpx.head(server.url + "/").status_code == 200
            bad = httpx.post(server.url + "/v1/messages", json={**body, "messages": [{"content": "x"}]})
            assert bad.status_code == 400
            assert bad.json() == {"type": "error", "error": {
                "type": "invalid_request_error", "message": "messages.0.role: Input should be 'user' or 'assistant'"}}
            # Anthropic's own texts for the common refusals.
            for broken, text in [({"max_tokens": 5}, "messages: Field required"),
                                 ({"max_tokens": 5, "messages": []}, "messages: at least one message is required"),
                                 ({"messages": body["messages"]}, "max_tokens: Field required")]:
                refused = httpx.post(server.url + "/v1/messages", json=broken)
                assert (refused.status_code, refused.json()["error"]["message"]) == (400, text)


class StrictTemplateUpstream(FakeOpenAI):
    """An OpenAI-compatible server whose chat template takes a system message only first (llama.cpp and
    Qwen templates say so with a 400)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await super().__call__(scope, receive, send)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        roles = [m.get("role") for m in json.loads(body or b"{}").get("messages", [])]
        if "system" in roles[1:]:
            payload = json.dumps({"error": {"message": "System message must be at the beginning.",
                                            "type": "invalid_request_error"}}).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": payload})
            return

        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return dict(await receive())
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await super().__call__(scope, replay, send)


def test_a_tier_refusing_mid_conversation_system_says_it_as_anthropic_does(tmp_path: Path) -> None:
    with serve_app_in_thread(StrictTemplateUpstream()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            body = {**claude_code_body(), "stream": False}
            refused = httpx.post(server.url + "/v1/messages?beta=true", json=body, headers=claude_code_headers())
            assert refused.status_code == 400
            message = refused.json()["error"]["message"]
            # What Claude Code checks before retrying without the mid-conversation-system beta:
            assert "Unexpected role" in message and "input message role" in message
            assert "System message must be at the beginning." in message
            # Its retry, without the system entry inside messages, goes through.
            body["messages"] = [m for m in body["messages"] if m["role"] != "system"]
            retried = httpx.post(server.url + "/v1/messages?beta=true", json=body, headers=claude_code_headers())
            assert retried.status_code == 200, retried.text
