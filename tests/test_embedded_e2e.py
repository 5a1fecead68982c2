"""The default set-up end to end: no upstream, no key, the default embedded model answering at L3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from daari.config import config_from_dict
from daari.eval.routing_eval import format_report, run_routing_eval
from daari.server.serve import RunningServer
from tests.support import daari_in_thread


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    data = tmp_path_factory.mktemp("embedded")
    config = config_from_dict({"server": {"port": 0}, "data_dir": str(Path(data) / "data")})
    with daari_in_thread(config) as running:
        yield running


@pytest.fixture
def client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def test_answers_from_the_embedded_model_then_from_l0(client: openai.OpenAI) -> None:
    ask = {"model": "daari", "max_tokens": 24, "temperature": 0,
           "messages": [{"role": "user", "content": "What is the capital of France?"}]}
    first = client.chat.completions.create(**ask)
    meta = first.model_extra["daari_meta"]
    assert meta["tier"] == "L3" and meta["executor"] == "embedded" and meta["cache_hit"] is False
    assert first.choices[0].message.content.strip()
    assert 0.0 <= meta["confidence"] <= 1.0
    assert first.usage.completion_tokens <= 24
    second = client.chat.completions.create(**ask)
    assert second.model_extra["daari_meta"]["tier"] == "L0"
    assert second.choices[0].message.content == first.choices[0].message.content


def test_streams_token_by_token(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model="daari", max_tokens=16, temperature=0, stream=True,
        messages=[{"role": "user", "content": "Name three colors."}]))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 2
    assert chunks[-1].model_extra["daari_meta"]["executor"] == "embedded"


def test_tools_get_an_explicit_error_not_a_fake_answer(client: openai.OpenAI) -> None:
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="daari", tools=tools,
                                       messages=[{"role": "user", "content": "list files"}])
    assert info.value.status_code == 422
    body = info.value.response.json()
    assert body["error"]["code"] == "tool_calls_unsupported_locally"
    assert body["daari_meta"]["error"] == "tool_calls_unsupported_locally"


def test_tools_with_tool_choice_none_can_be_answered_locally(client: openai.OpenAI) -> None:
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]
    reply = client.chat.completions.create(model="daari", tools=tools, tool_choice="none", max_tokens=8,
                                           messages=[{"role": "user", "content": "Say ok."}])
    assert reply.model_extra["daari_meta"]["tier"] == "L3"
    assert reply.model_extra["daari_meta"]["agent_turn"] is True


def test_anthropic_client_against_the_embedded_model(server: RunningServer) -> None:
    client = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=300)
    reply = client.messages.create(model="daari", max_tokens=16, system=[{"type": "text", "text": "Be brief."}],
                                   messages=[{"role": "user", "content": "Say hello."}])
    assert reply.content[0].type == "text" and reply.content[0].text
    assert reply.model_extra["daari_meta"]["executor"] == "embedded"
    with client.messages.stream(model="daari", max_tokens=16,
                                messages=[{"role": "user", "content": "Say goodbye."}]) as stream:
        text = "".join(stream.text_stream)
    assert text and stream.get_final_message().content[0].text == text


def test_health_reports_the_model_loaded(server: RunningServer) -> None:
    health = httpx.get(server.url + "/healthz").json()
    assert health["models_loaded"] is True
    assert health["tiers"]["L3"]["loaded"] is True


def test_golden_prompts_meet_the_mvp_criteria(server: RunningServer) -> None:
    report = run_routing_eval(server.url, max_tokens=12)
    text = format_report(report)
    assert report.passed, text
