"""Local models that call tools, through a running daari and a fake Ollama: tool calls written as text (each format
local models use, streamed one character at a time) reach the client as real tool calls in its own protocol; a
call that breaks the tool's schema escalates; a request larger than a local tier's window goes to the next tier,
never cut, and the decision says why."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from daari.local.tool_text import CallPiece, TextPiece, ToolTextParser
from daari.protocol.chat import Tool
from tests.claude_session import content_from_sse
from tests.fakes.ollama_upstream import TEXT_TOOL_CALLS, FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
           "required": ["city"]}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather by city",
                                                  "parameters": WEATHER}}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "weather by city", "input_schema": WEATHER}]
FORMATS = ["hermes", "qwen", "bare", "fenced", "mistral"]


def run_parser(chunks: list[str]) -> tuple[str, list[tuple[str, str]]]:
    parser = ToolTextParser([Tool("get_weather", None, WEATHER)])
    pieces = [p for chunk in chunks for p in parser.feed(chunk)] + parser.close()
    return ("".join(p.text for p in pieces if isinstance(p, TextPiece)),
            [(p.name, p.arguments) for p in pieces if isinstance(p, CallPiece)])


@pytest.mark.parametrize("name", FORMATS)
def test_every_split_of_every_format_gives_the_same_call(name: str) -> None:
    text = TEXT_TOOL_CALLS[name]
    whole = run_parser([text])
    assert whole[1] == [("get_weather", '{"city":"Paris","days":2}')]
    for cut in range(len(text) + 1):
        assert run_parser([text[:cut], text[cut:]]) == whole, cut
    rng = random.Random(22)
    for _ in range(100):
        cuts = sorted(rng.sample(range(len(text) + 1), 8))
        assert run_parser([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]) == whole


@pytest.mark.parametrize("text", ['Here is the data:\n{"name": "Bob", "age": 3}\n',
                                  "Use `ls`, {braces} and <tool stuff>.\n```python\nprint(1)\n```\n",
                                  '```json\n{"name": "unknown_tool", "arguments": {}}\n```'])
def test_text_that_is_not_a_call_passes_unchanged(text: str) -> None:
    for cut in range(len(text) + 1):
        assert run_parser([text[:cut], text[cut:]]) == (text, [])


def local_config(tmp_path: Path, ollama: str, **extra: Any) -> Any:
    return make_config(tmp_path, tiers={"L4": {"executor": "ollama", "base_url": ollama}, **extra})


@pytest.mark.parametrize("name", FORMATS)
async def test_text_tool_calls_reach_an_openai_client_as_tool_calls(tmp_path: Path, name: str) -> None:
    ollama = FakeOllama()
    async with serve_app(ollama) as base, daari_server(local_config(tmp_path, base)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        body = {"model": name, "messages": [{"role": "user", "content": "weather in Paris for two days?"}],
                "tools": OPENAI_TOOLS}
        whole = (await client.post("/v1/chat/completions", json=body)).json()
        stream = await client.post("/v1/chat/completions", json={**body, "stream": True},
                                   headers={"x-daari-no-cache": "true"})
    choice = whole["choices"][0]
    assert choice["finish_reason"] == "tool_calls", whole
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris","days":2}'}
    chunks = [json.loads(line[6:]) for line in stream.text.splitlines() if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c.get("choices")]
    arguments = "".join(tc["function"].get("arguments", "") for d in deltas for tc in d.get("tool_calls", []))
    assert json.loads(arguments) == {"city": "Paris", "days": 2}
    assert [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")][-1] == "tool_calls"
    assert "<tool_call>" not in stream.text and "[TOOL_CALLS]" not in stream.text


@pytest.mark.parametrize("name", FORMATS)
async def test_text_tool_calls_reach_an_anthropic_client_as_tool_use(tmp_path: Path, name: str) -> None:
    ollama = FakeOllama()
    async with serve_app(ollama) as base, daari_server(local_config(tmp_path, base)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        body = {"model": name, "max_tokens": 256, "stream": True, "tools": ANTHROPIC_TOOLS,
                "messages": [{"role": "user", "content": "weather in Paris for two days?"}]}
        reply = await client.post("/v1/messages", json=body)
    content, final = content_from_sse(reply.text)
    assert final["delta"]["stop_reason"] == "tool_use"
    [use] = [b for b in content if b["type"] == "tool_use"]
    assert (use["name"], use["input"]) == ("get_weather", {"city": "Paris", "days": 2})
    assert '"input_json_delta"' in reply.text


async def test_a_call_that_breaks_the_schema_escalates(tmp_path: Path) -> None:
    ollama, frontier = FakeOllama(), FakeOpenAI()
    async with serve_app(ollama) as base, serve_app(frontier) as upstream:
        config = local_config(tmp_path, base, L6={"executor": "openai", "base_url": upstream + "/v1",
                                                  "model": "tools"})
        config.frontier.enabled = True
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            reply = await client.post("/v1/chat/completions", json={
                "model": "badargs", "messages": [{"role": "user", "content": "weather?"}], "tools": OPENAI_TOOLS})
    meta = reply.json()["daari_meta"]
    assert meta["tier"] == "L6"
    assert meta["attempts"][0]["tier"] == "L4" and meta["attempts"][0]["outcome"] == "low_confidence"


async def test_a_request_larger_than_the_local_window_escalates_uncut(tmp_path: Path) -> None:
    ollama, frontier = FakeOllama(), FakeOpenAI()
    ollama.windows["good"] = 8192  # the local model's 8k window, as /api/show reports it
    async with serve_app(ollama) as base, serve_app(frontier) as upstream:
        # The user's mapping sends "local-*" models to the local tier first (docs/routing.md, routing.models).
        config = make_config(tmp_path, tiers={"L4": {"executor": "ollama", "base_url": base, "model": "good"},
                                              "L6": {"executor": "openai", "base_url": upstream + "/v1",
                                                     "model": "good"}},
                             frontier={"enabled": True}, routing={"models": {"local-*": "L4"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            small = await client.post("/v1/chat/completions", json={
                "model": "local-qwen", "messages": [{"role": "user", "content": "summarise: " + "word " * 600}]})
            big = await client.post("/v1/chat/completions", json={
                "model": "local-qwen", "messages": [{"role": "user", "content": "summarise: " + "word " * 32_000}]})
    assert small.json()["daari_meta"]["tier"] == "L4"
    assert ollama.requests[0]["options"]["num_ctx"] in (2048, 3072)  # sized to the request, within 8k
    meta = big.json()["daari_meta"]
    assert meta["tier"] == "L6"  # ~40k tokens: not for the 8k local model
    assert {"tier": "L4", "outcome": "skipped_context", "confidence": None, "error": None} in meta["attempts"]
    assert meta["mapped"] == {"by": "model", "tier": "L4"}
    assert meta["context"]["windows"] == {"L4": 8192} and meta["context"]["need"] > 40_000
    assert len(ollama.requests) == 1  # the big request never reached Ollama (nothing cut)
    assert frontier.requests[-1].body["messages"][0]["content"].count("word") == 32_000


async def test_nothing_fits_is_a_clear_refusal(tmp_path: Path) -> None:
    ollama = FakeOllama()
    ollama.windows["good"] = 8192
    async with serve_app(ollama) as base:
        config = make_config(tmp_path, tiers={"L4": {"executor": "ollama", "base_url": base, "model": "good"}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            openai = await client.post("/v1/chat/completions", json={
                "model": "daari", "messages": [{"role": "user", "content": "word " * 40_000}]})
            anthropic = await client.post("/v1/messages", json={
                "model": "daari", "max_tokens": 100, "messages": [{"role": "user", "content": "word " * 40_000}]})
            table = server.parts.executors["L4"].context_window()
    assert openai.status_code == 400 and openai.json()["error"]["code"] == "context_length_exceeded"
    assert anthropic.status_code == 400 and "prompt is too long" in anthropic.json()["error"]["message"]
    assert table == 8192
