"""Every Response object and stream event daari builds validates against the published Responses schema
(tests/responses_schema.py: the Open Responses specification), on every path a Responses request can take:
a chat-completions tier, an Anthropic tier, an Ollama tier, a Responses tier (pass-through), the embedded
model, and L0 replays of each; stream and non-stream; the requests of the Open Responses compliance suite
(basic, system prompt, multi-turn, assistant phase, image input, tool calling) plus one that sets every
sampling field, whose values must come back as sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from daari.config import config_from_dict
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.serving import serve_app_in_thread
from tests.responses_schema import check_response, check_stream
from tests.support import daari_in_thread, make_config, upstream_tier

PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
         "AAAABJRU5ErkJggg==")
# The compliance suite's tool, with the parameters the fake upstreams call it with, and the second tool the
# Anthropic fake calls: local tiers' tool calls are checked against the offered tools, and a call that breaks
# them is never stored (the L0 replay below would miss).
WEATHER = {"type": "function", "name": "get_weather", "description": "Get the current weather for a location",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                          "required": ["city"]}}
LIST_FILES = {"type": "function", "name": "list_files", "description": "List the files in the working directory",
              "parameters": {"type": "object", "properties": {}}}
SETTINGS = {"temperature": 0.3, "top_p": 0.9, "max_output_tokens": 200, "parallel_tool_calls": False,
            "store": False, "truncation": "disabled", "metadata": {"run": "schema"}, "safety_identifier": "u-1",
            "prompt_cache_key": "session-9", "service_tier": "auto", "max_tool_calls": 3, "top_logprobs": 2,
            "text": {"verbosity": "low"}, "reasoning": {"effort": "low"}, "instructions": "Be brief."}
REQUESTS: dict[str, dict[str, Any]] = {
    "basic": {"model": "good", "input": [{"type": "message", "role": "user",
                                          "content": "Say hello in exactly 3 words."}]},
    "system-prompt": {"model": "good", "input": [
        {"type": "message", "role": "system", "content": "You are a pirate."},
        {"type": "message", "role": "user", "content": "Say hello."}]},
    "multi-turn": {"model": "good", "input": [
        {"type": "message", "role": "user", "content": "My name is Alice."},
        {"type": "message", "role": "assistant", "content": "Hello Alice!"},
        {"type": "message", "role": "user", "content": "What is my name?"}]},
    "assistant-phase": {"model": "good", "input": [
        {"type": "message", "role": "assistant", "phase": "commentary", "content": "I should answer."},
        {"type": "message", "role": "assistant", "phase": "final_answer", "content": "The number is four."},
        {"type": "message", "role": "user", "content": "Repeat only the number."}]},
    "image-input": {"model": "good", "input": [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "What do you see?"}, {"type": "input_image", "image_url": PIXEL}]}]},
    "tool-calling": {"model": "tools", "tools": [WEATHER, LIST_FILES], "input": [
        {"type": "message", "role": "user", "content": "What's the weather like in San Francisco?"}]},
    "every-setting": {"model": "good", "input": "Tell me about sampling.", **SETTINGS},
}
TIERS = {"L3": "openai", "L4": "anthropic", "L5": "ollama", "L6": "openai_responses"}


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("schema")
    with serve_app_in_thread(FakeOpenAI()) as chat, serve_app_in_thread(FakeAnthropic()) as claude, \
            serve_app_in_thread(FakeOllama()) as ollama, serve_app_in_thread(FakeResponses()) as responses:
        tiers = {"L3": upstream_tier("openai", chat + "/v1"), "L4": upstream_tier("anthropic", claude),
                 "L5": upstream_tier("ollama", ollama),
                 "L6": upstream_tier("openai", responses + "/v1", wire_api="responses")}
        with daari_in_thread(make_config(tmp, tiers=tiers, frontier={"enabled": True})) as server:
            yield server.url


def _post(url: str, body: dict[str, Any], tier: str, stream: bool, timeout: float = 60) -> httpx.Response:
    reply = httpx.post(url + "/v1/responses", json={**body, "stream": stream}, timeout=timeout,
                       headers={"x-daari-tier-override": tier})
    assert reply.status_code == 200, reply.text
    return reply


def _checked_stream(reply: httpx.Response) -> dict[str, Any]:
    check = check_stream(reply.content)
    assert check.errors == [], check.errors
    assert check.unchecked <= {"response.custom_tool_call_input.delta", "response.custom_tool_call_input.done"}
    assert check.events[0]["type"] == "response.created"
    assert check.events[-1]["type"] in ("response.completed", "response.incomplete")
    final: dict[str, Any] = check.events[-1]["response"]
    assert {e["response"]["id"] for e in check.events if "response" in e} == {final["id"]}
    return final


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("shape", REQUESTS)
def test_every_path_and_its_l0_replay_validates(server_url: str, tier: str, shape: str) -> None:
    body = REQUESTS[shape]
    whole = _post(server_url, body, tier, stream=False).json()
    assert check_response(whole) == []
    assert whole["daari_meta"]["tier"] == tier and whole["daari_meta"]["executor"] == TIERS[tier]
    streamed = _checked_stream(_post(server_url, body, tier, stream=True))
    assert streamed["status"] == "completed" and streamed["output"]
    if shape == "tool-calling":
        assert any(item["type"] == "function_call" for item in whole["output"])
    if shape == "every-setting" and tier != "L6":  # daari's own object echoes what the client set
        for key, value in SETTINGS.items():
            echoed = whole[key] if key not in ("text", "reasoning") else {
                k: v for k, v in whole[key].items() if k in value}
            assert echoed == value, key
    # The same request again is an L0 hit, replayed in both shapes.
    hit = _post(server_url, body, tier, stream=False).json()
    assert hit["daari_meta"]["cache_hit"] is True and check_response(hit) == []
    assert hit["id"] != whole["id"]  # a replay is a new response
    replayed = _checked_stream(_post(server_url, body, tier, stream=True))
    assert replayed["daari_meta"]["cache_hit"] is True


def test_defaults_are_echoed_when_the_request_sets_none(server_url: str) -> None:
    whole = _post(server_url, {"model": "good", "input": "hi", "tools": [WEATHER]}, "L3", stream=False).json()
    assert (whole["temperature"], whole["top_p"], whole["presence_penalty"], whole["frequency_penalty"],
            whole["top_logprobs"], whole["service_tier"], whole["background"]) == (1.0, 1.0, 0.0, 0.0, 0, "default",
                                                                                  False)
    assert whole["tools"] == [{**WEATHER, "strict": None}]  # as sent, with the fields the schema requires
    assert isinstance(whole["completed_at"], int) and whole["completed_at"] >= whole["created_at"]


def test_a_failure_mid_stream_validates(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    fake.script = ["drop"]
    with serve_app_in_thread(fake) as chat, \
            daari_in_thread(make_config(tmp_path, tiers={"L3": upstream_tier("openai", chat + "/v1")})) as server:
        check = check_stream(_post(server.url, REQUESTS["basic"], "L3", stream=True).content)
    assert check.errors == []
    assert [e["type"] for e in check.events][-2:] == ["error", "response.failed"]
    assert check.unchecked == {"error"}  # OpenAI's shape, checked against the OpenAI SDK's type


def test_stored_response_validates(server_url: str) -> None:
    created = _post(server_url, {"model": "good", "input": "keep me", "store": True}, "L3", stream=False).json()
    stored = httpx.get(f"{server_url}/v1/responses/{created['id']}", timeout=30).json()
    assert check_response(stored) == []


def test_embedded_model_path_validates(tmp_path: Path) -> None:
    config = config_from_dict({"server": {"port": 0}, "data_dir": str(tmp_path / "data")})
    body = {"model": "daari", "input": "Name a colour.", "max_output_tokens": 8, "temperature": 0}
    with daari_in_thread(config) as server:
        whole = _post(server.url, body, "L3", stream=False, timeout=300).json()  # the model loads first
        assert whole["daari_meta"]["executor"] == "embedded" and check_response(whole) == []
        streamed = _checked_stream(_post(server.url, {**body, "input": "Name a fruit."}, "L3", stream=True,
                                         timeout=300))
        assert streamed["daari_meta"]["executor"] == "embedded"
