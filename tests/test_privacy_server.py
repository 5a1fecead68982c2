"""Secrets never leave the machine (docs/privacy.md), through a running daari whose remote tier is a fake upstream
that records what it received: no fixture secret arrives, the placeholders the model echoes come back as the
secrets (text and tool calls, stream and not, OpenAI and Anthropic), turn 2's prefix is turn 1's, and nothing
holds the secrets afterwards (log, L0 cache, metrics, daari_meta)."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from daari.protocol import sse
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.serving import serve_app
from tests.privacy_fixtures import SECRETS, tool_output
from tests.support import daari_server, make_config, upstream_tier
from tests.test_decision_log import rows_when
from tests.test_report import run_report

BASH_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "run a shell command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
ANTHROPIC_BASH = {"name": "bash", "description": "run a shell command",
                  "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                                   "required": ["command"]}}


def openai_turn(model: str, stream: bool, extra: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {"model": model, "stream": stream, "tools": [BASH_TOOL], "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Deploy the app with the production settings."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "bash", "arguments": json.dumps({"command": "cat .env.production deploy/id_ed25519"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": tool_output()},
        *extra]}


def anthropic_turn(model: str, stream: bool) -> dict[str, Any]:
    return {"model": model, "stream": stream, "max_tokens": 200, "tools": [ANTHROPIC_BASH],
            "system": "You are a coding agent.", "messages": [
                {"role": "user", "content": "Deploy the app with the production settings."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash",
                                                   "input": {"command": "cat .env.production"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": tool_output()}]}]}


def strings(value: Any) -> str:
    """Every string in a JSON value, decoded (a private key's newlines are newlines, not `\\n`), one a line;
    JSON text inside strings (tool call arguments) decoded as well."""
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except ValueError:
            return value
        return value + "\n" + strings(inner) if isinstance(inner, (dict, list)) else value
    if isinstance(value, dict):
        return "\n".join(strings(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(strings(v) for v in value)
    return ""


def assert_no_secret(text: str) -> None:
    leaked = [kind for kind, secret in SECRETS.items() if secret in text]
    assert not leaked, f"secrets that left the machine: {leaked}"


def assert_every_secret(text: str) -> None:
    missing = [kind for kind, secret in SECRETS.items() if secret not in text]
    assert not missing, f"secrets not restored: {missing}"


def openai_answer(response: httpx.Response, stream: bool) -> tuple[str, str]:
    """The answer's text and its tool call's arguments."""
    assert response.status_code == 200, response.text
    if not stream:
        message = response.json()["choices"][0]["message"]
        return message["content"] or "", message["tool_calls"][0]["function"]["arguments"]
    text, arguments = [], []
    for event in sse.SSEDecoder().feed(response.content):
        if event.data == "[DONE]":
            continue
        for choice in json.loads(event.data).get("choices") or []:
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                arguments.append((call.get("function") or {}).get("arguments") or "")
    return "".join(text), "".join(arguments)


def anthropic_answer(response: httpx.Response, stream: bool) -> tuple[str, dict[str, Any]]:
    """The answer's text and its tool_use input."""
    assert response.status_code == 200, response.text
    if not stream:
        content = response.json()["content"]
        text = "".join(b["text"] for b in content if b["type"] == "text")
        return text, next(b["input"] for b in content if b["type"] == "tool_use")
    text, partial = [], []
    for event in sse.SSEDecoder().feed(response.content):
        data = json.loads(event.data)
        delta = data.get("delta") or {}
        text.append(delta.get("text") or "")
        partial.append(delta.get("partial_json") or "")
    return "".join(text), json.loads("".join(partial))


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_secrets_stay_and_echoes_come_back(tmp_path: Path, stream: bool,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake = FakeOpenAI()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", url + "/v1")},
                             frontier={"enabled": True}, log={"prompts": "full"})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/chat/completions", json=openai_turn("echo_secret", stream))
            text, arguments = openai_answer(response, stream)
            metrics = (await client.get("/metrics")).text
            rows = await rows_when(tmp_path / "data", 1)
    # The decision log and `daari report` count what was kept back (never what it was).
    assert rows[0]["secrets_redacted"] == len(SECRETS) and rows[0]["results_withheld"] == 0
    report = json.loads(run_report(tmp_path / "data", "--json").stdout)
    assert report["privacy"] == {"secrets_redacted": len(SECRETS), "results_withheld": 0, "requests": 1}
    received = strings(fake.requests[-1].body)
    assert_no_secret(received)
    assert "REDACTED_PRIVATE_KEY_" in received and "REDACTED_AWS_ACCESS_KEY_" in received
    # The model echoed every placeholder; the client sees every secret, in the text and in valid JSON arguments.
    assert_every_secret(text)
    assert_every_secret(json.loads(arguments)["command"])
    assert "REDACTED_" not in text + arguments
    assert 'daari_privacy_secrets_total{action="on",kind="aws_access_key",tier="L6"} 1.0' in metrics
    assert 'daari_privacy_restored_total{tier="L6"}' in metrics
    assert_no_secret(metrics)
    assert_no_secret(caplog.text)
    # An answer holding restored secrets is not cached: the L0 store never holds them.
    assert_no_secret(repr(sqlite3.connect(tmp_path / "data" / "l0.sqlite").execute("select * from l0").fetchall()))


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_native_secrets_stay_and_echoes_come_back(tmp_path: Path, stream: bool) -> None:
    fake = FakeAnthropic()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("anthropic", url)}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/messages", json=anthropic_turn("echo_secret", stream))
            text, tool_input = anthropic_answer(response, stream)
            meta = response.json()["daari_meta"] if not stream else None
    received = strings(fake.requests[-1].body)
    assert_no_secret(received)
    assert_every_secret(text)
    assert_every_secret(tool_input["command"])
    if meta is not None:
        assert meta["redacted"] == len(SECRETS)


async def test_anthropic_client_to_openai_upstream_is_restored(tmp_path: Path) -> None:
    """Crossing protocols: the neutral request is what is redacted, the neutral stream what is restored."""
    fake = FakeOpenAI()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", url + "/v1")}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/messages", json=anthropic_turn("echo_secret", True))
            text, tool_input = anthropic_answer(response, True)
    assert_no_secret(strings(fake.requests[-1].body))
    assert_every_secret(text)
    assert_every_secret(tool_input["command"])


async def test_turn_two_prefix_is_turn_one(tmp_path: Path) -> None:
    """The same secret gets the same placeholder on every turn, so the provider's prompt cache keeps the prefix."""
    fake = FakeOpenAI()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", url + "/v1")}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            first = await client.post("/v1/chat/completions", json=openai_turn("echo_secret", False))
            answer = first.json()["choices"][0]["message"]
            follow_up = [{"role": "assistant", "content": answer["content"], "tool_calls": answer["tool_calls"]},
                         {"role": "tool", "tool_call_id": answer["tool_calls"][0]["id"], "content": "deployed"},
                         {"role": "user", "content": "Now check the logs."}]
            second = await client.post("/v1/chat/completions",
                                       json=openai_turn("echo_secret", False, follow_up))
            assert second.status_code == 200
    turn1, turn2 = (r.body["messages"] for r in fake.requests[-2:])
    assert turn2[:len(turn1)] == turn1
    # The answer daari restored for turn 1 went back as the client sent it, and was redacted to the same marks.
    assert turn2[len(turn1)]["content"] == turn1_answer_text(fake.requests[-2].body)
    assert_no_secret(strings(turn2))


def turn1_answer_text(body: dict[str, Any]) -> str:
    """What echo_secret answered to `body`, as the model wrote it (placeholders)."""
    import re
    marks = list(dict.fromkeys(re.findall(r"REDACTED_[A-Z_]+_[0-9a-f]{12}", json.dumps(body))))
    return "I will use " + " and ".join(marks) + "."


async def test_local_tiers_get_the_request_as_sent(tmp_path: Path) -> None:
    """A tier on this machine (loopback base_url) is not remote unless configured so; `remote: true` redacts it."""
    local, marked = FakeOpenAI(), FakeOpenAI()
    async with serve_app(local) as url_local, serve_app(marked) as url_marked:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", url_local + "/v1"),
                                              "L4": upstream_tier("openai", url_marked + "/v1", remote=True)})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            for tier in ("L3", "L4"):
                response = await client.post("/v1/chat/completions", json=openai_turn("tools", False),
                                             headers={"x-daari-tier-override": tier})
                assert response.status_code == 200, response.text
    assert_every_secret(strings(local.requests[-1].body))
    assert_no_secret(strings(marked.requests[-1].body))


@pytest.mark.parametrize("mode", ["report", "off"])
async def test_report_and_off_send_as_is(tmp_path: Path, mode: str) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", url + "/v1")},
                             frontier={"enabled": True}, privacy={"redact": mode})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/chat/completions", json=openai_turn("tools", False))
            assert response.status_code == 200
            metrics = (await client.get("/metrics")).text
    assert_every_secret(strings(fake.requests[-1].body))
    counted = 'daari_privacy_secrets_total{action="report",kind="jwt",tier="L6"} 1.0' in metrics
    assert counted == (mode == "report")
    assert response.json()["daari_meta"].get("secrets_seen") == (len(SECRETS) if mode == "report" else None)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_never_send_withholds_the_file(tmp_path: Path, protocol: str) -> None:
    openai_fake, anthropic_fake = FakeOpenAI(), FakeAnthropic()
    async with serve_app(openai_fake) as openai_url, serve_app(anthropic_fake) as anthropic_url:
        tier = (upstream_tier("openai", openai_url + "/v1") if protocol == "openai"
                else upstream_tier("anthropic", anthropic_url))
        config = make_config(tmp_path, tiers={"L6": tier}, frontier={"enabled": True},
                             privacy={"redact": "off", "never_send": [".env*", "*.pem"]})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            if protocol == "openai":
                response = await client.post("/v1/chat/completions", json=openai_turn("tools", False))
            else:
                response = await client.post("/v1/messages", json=anthropic_turn("good", False))
            assert response.status_code == 200, response.text
    fake = openai_fake if protocol == "openai" else anthropic_fake
    received = strings(fake.requests[-1].body)
    assert_no_secret(received)  # redaction is off: the whole result was withheld
    assert "privacy.never_send" in received and ".env.production" in received
    assert "Deploy the app" in received  # the rest of the conversation went as sent


async def test_decision_log_keeps_no_secret(tmp_path: Path) -> None:
    """`log.prompts: full` keeps the last user message with its secrets as placeholders, whatever privacy.redact."""
    fake = FakeOpenAI()
    pasted = f"why does this fail? export GITHUB_TOKEN={SECRETS['GITHUB_TOKEN']} && gh auth status"
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", url + "/v1")}, frontier={"enabled": True},
                             log={"prompts": "full"}, privacy={"redact": "off"})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/chat/completions", json={
                "model": "good", "messages": [{"role": "user", "content": pasted}]})
            assert response.status_code == 200
            rows = await rows_when(tmp_path / "data", 1)
    prompt = rows[0]["prompt"]
    assert "REDACTED_GITHUB_TOKEN_" in prompt and "gh auth status" in prompt
    assert_no_secret(repr(rows))


async def test_token_counts_sent_to_a_remote_tier_are_redacted(tmp_path: Path) -> None:
    """Claude Code asks count_tokens before many turns: the count goes to the remote tier's upstream too."""
    fake = FakeAnthropic()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("anthropic", url)}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            body = anthropic_turn("good", False)
            del body["stream"], body["max_tokens"]
            response = await client.post("/v1/messages/count_tokens", json=body)
    assert response.status_code == 200 and response.json()["input_tokens"] > 0, response.text
    assert fake.requests[-1].path.endswith("/count_tokens")
    received = strings(fake.requests[-1].body)
    assert_no_secret(received)
    assert "REDACTED_JWT_" in received


def responses_turn(stream: bool) -> dict[str, Any]:
    return {"model": "echo_secret", "stream": stream, "store": False,
            "tools": [{"type": "function", "name": "bash", "parameters": BASH_TOOL["function"]["parameters"]}],
            "input": [{"role": "user", "content": "Deploy the app with the production settings."},
                      {"type": "function_call", "call_id": "call_1", "name": "bash",
                       "arguments": json.dumps({"command": "cat .env.production"})},
                      {"type": "function_call_output", "call_id": "call_1", "output": tool_output()}]}


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_client_secrets_stay_and_echoes_come_back(tmp_path: Path, stream: bool) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", url + "/v1")}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/responses", json=responses_turn(stream))
    assert response.status_code == 200, response.text
    if stream:
        events = [json.loads(e.data) for e in sse.SSEDecoder().feed(response.content)]
        body = next(e["response"] for e in events if e.get("type") == "response.completed")
        deltas = "".join(e.get("delta", "") for e in events if e.get("type") == "response.output_text.delta")
        assert_every_secret(deltas)
    else:
        body = response.json()
    text = "".join(part["text"] for item in body["output"] if item["type"] == "message" for part in item["content"])
    call = next(item for item in body["output"] if item["type"] == "function_call")
    assert_no_secret(strings(fake.requests[-1].body))
    assert_every_secret(text)
    assert_every_secret(json.loads(call["arguments"])["command"])


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_native_upstream_is_restored_across_events(tmp_path: Path, stream: bool) -> None:
    """Codex -> a Responses upstream, passed through natively: deltas split inside placeholders come out whole, the
    sequence numbers still increase, and the done events and the final response agree with the deltas."""
    fake = FakeResponses()
    async with serve_app(fake) as url:
        tier = upstream_tier("openai", url + "/v1", wire_api="responses")
        config = make_config(tmp_path, tiers={"L6": tier}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            response = await client.post("/v1/responses", json=responses_turn(stream))
    assert response.status_code == 200, response.text
    assert_no_secret(strings(fake.requests[-1].body))
    if stream:
        events = [json.loads(e.data) for e in sse.SSEDecoder().feed(response.content)]
        numbers = [e["sequence_number"] for e in events]
        assert numbers == sorted(set(numbers))
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        arguments = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
        assert text == next(e["text"] for e in events if e["type"] == "response.output_text.done")
        assert_every_secret(text)
        assert_every_secret(json.loads(arguments)["command"])
        body = next(e["response"] for e in events if e["type"] == "response.completed")
    else:
        body = response.json()
    call = next(item for item in body["output"] if item["type"] == "function_call")
    assert_every_secret(json.loads(call["arguments"])["command"])
    assert "REDACTED_" not in response.text


async def test_answers_holding_a_secret_stay_out_of_the_cache(tmp_path: Path) -> None:
    """A local tier gets secrets as sent and may echo them: such an answer (or one to a prompt holding a secret,
    which L1 would keep) is served but never stored; an ordinary answer is, so the same request hits L0."""
    fake = FakeOpenAI()
    pasted = f"is this token valid? GITHUB_TOKEN={SECRETS['GITHUB_TOKEN']}"
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", url + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            caches = []
            for content in (pasted, pasted, "explain git rebase", "explain git rebase"):
                response = await client.post("/v1/chat/completions", json={
                    "model": "good", "messages": [{"role": "user", "content": content}]})
                assert response.status_code == 200
                caches.append(response.headers["x-daari-cache"])
            echoed = response.json()
    assert caches == ["miss", "miss", "miss", "hit"]
    assert "careful answer" in echoed["choices"][0]["message"]["content"]
    stored = sqlite3.connect(tmp_path / "data" / "l0.sqlite").execute("select * from l0").fetchall()
    assert len(stored) == 1
    assert_no_secret(repr(stored))


# Valid base64 whose run `/AKIA.../` a detector would take for an AWS key: an image's bytes, never text to redact.
IMAGE_DATA = "iVBORw0KGgoAAAANSUhEUg/" + SECRETS["AWS_ACCESS_KEY"] + "/AAAAAAAAAAAA=="
TOOL_SECRETS = ("GITHUB_TOKEN", "SLACK_TOKEN")


def described_tool_turn(protocol: str) -> dict[str, Any]:
    """A turn whose tool definition holds secrets (its description, a parameter's description) and an image."""
    description = f"Deploy the app. It authenticates with GITHUB_TOKEN={SECRETS['GITHUB_TOKEN']}."
    schema = {"type": "object", "properties": {"command": {
        "type": "string", "description": f"posts to Slack with {SECRETS['SLACK_TOKEN']}"}}, "required": ["command"]}
    if protocol == "anthropic":
        return {"model": "echo_secret", "max_tokens": 200,
                "tools": [{"name": "deploy", "description": description, "input_schema": schema}],
                "messages": [{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE_DATA}},
                    {"type": "text", "text": "Deploy what this screenshot shows."}]}]}
    return {"model": "echo_secret", "tools": [{"type": "function", "function": {
        "name": "deploy", "description": description, "parameters": schema}}],
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE_DATA}"}},
                {"type": "text", "text": "Deploy what this screenshot shows."}]}]}


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
async def test_tool_definitions_are_redacted_and_images_left_whole(tmp_path: Path, protocol: str) -> None:
    """Anthropic client to an OpenAI upstream: the neutral tool definitions are what is sent (and redacted); OpenAI
    to OpenAI: the client's own body is. Either way the image's bytes arrive as the client sent them."""
    fake = FakeOpenAI()
    async with serve_app(fake) as url:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("openai", url + "/v1")}, frontier={"enabled": True})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            path = "/v1/messages" if protocol == "anthropic" else "/v1/chat/completions"
            response = await client.post(path, json=described_tool_turn(protocol))
    if protocol == "anthropic":
        text, tool_input = anthropic_answer(response, False)
        command = tool_input["command"]
    else:
        text, arguments = openai_answer(response, False)
        command = json.loads(arguments)["command"]
    received = strings(fake.requests[-1].body)
    tool = fake.requests[-1].body["tools"][0]["function"]
    assert all(SECRETS[kind] not in received for kind in TOOL_SECRETS)
    assert "REDACTED_GITHUB_TOKEN_" in tool["description"]
    assert "REDACTED_SLACK_TOKEN_" in tool["parameters"]["properties"]["command"]["description"]
    assert f"data:image/png;base64,{IMAGE_DATA}" in received  # not a byte of the image changed
    # The model echoed the placeholders of the tool's secrets: the client gets the secrets back.
    assert all(SECRETS[kind] in text and SECRETS[kind] in command for kind in TOOL_SECRETS)
    assert "REDACTED_" not in text + command
