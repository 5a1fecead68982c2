"""Nothing dropped on the way: every field daari does not interpret reaches an upstream of the client's
protocol as sent, and is in the L0 key unless it is on the list of fields that cannot change the answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from daari.protocol.key_fields import is_non_answer_field
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

SHELL = {"type": "function", "function": {"name": "shell", "description": "Run a command", "strict": True,
                                          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                                                         "required": ["cmd"], "additionalProperties": False}}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}}
PDF = {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"}}

# (field, value): each is sent alone on top of a plain request.
OPENAI_FIELDS: list[tuple[str, Any]] = [
    ("reasoning_effort", "high"), ("verbosity", "low"), ("parallel_tool_calls", False),
    ("service_tier", "flex"), ("seed", 42), ("logit_bias", {"50256": -100}),
    ("prediction", {"type": "content", "content": "def f(): pass"}), ("modalities", ["text", "audio"]),
    ("audio", {"voice": "alloy", "format": "wav"}), ("web_search_options", {"search_context_size": "low"}),
    ("store", True), ("metadata", {"run": "r1"}), ("user", "u-1"), ("prompt_cache_key", "repo-x"),
    ("a_field_from_2031", {"nested": [1, "two"]}), ("tools", [SHELL]),
    ("messages", [{"role": "developer", "content": "be brief"},
                  {"role": "user", "content": [{"type": "text", "text": "hear this"}, AUDIO, PDF]}]),
]


@pytest.fixture
def openai_tier(tmp_path: Path) -> Iterator[tuple[str, FakeOpenAI]]:
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            yield server.url, fake


def _raw_body(fake: FakeOpenAI) -> dict[str, Any]:
    body = fake.requests[-1].body
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize(("field", "value"), OPENAI_FIELDS, ids=[f for f, _ in OPENAI_FIELDS])
def test_openai_field_reaches_the_upstream_unchanged(openai_tier: tuple[str, FakeOpenAI], field: str,
                                                     value: Any) -> None:
    url, fake = openai_tier
    base: dict[str, Any] = {"model": "good", "messages": [{"role": "user", "content": f"field {field}"}]}
    if field == "parallel_tool_calls":  # only sent with tools (OpenAI refuses it without)
        base["tools"] = [SHELL]
    body = {**base, field: value}
    reply = httpx.post(url + "/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    sent = _raw_body(fake)
    # Byte for byte: the field's JSON as the upstream received it is the JSON the client sent.
    assert json.dumps(sent[field], sort_keys=True) == json.dumps(value, sort_keys=True)
    assert {k: v for k, v in sent.items() if k not in ("stream",)} == body
    # In the key unless it cannot change the answer: without the field, a miss; with it again, a hit.
    plain = httpx.post(url + "/v1/chat/completions", json=base)
    answer_field = field in ("messages", "tools") or not is_non_answer_field("openai", field)
    assert plain.headers["x-daari-cache"] == ("miss" if answer_field else "hit")
    again = httpx.post(url + "/v1/chat/completions", json=body)
    assert again.headers["x-daari-cache"] == "hit"


def test_openai_sdk_extra_fields_and_strict_tools(openai_tier: tuple[str, FakeOpenAI]) -> None:
    url, fake = openai_tier
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
    client.chat.completions.create(model="tools", messages=[{"role": "user", "content": "run ls"}],
                                   tools=[SHELL], reasoning_effort="low", parallel_tool_calls=False,
                                   extra_body={"verbosity": "high"})
    sent = _raw_body(fake)
    assert sent["tools"] == [SHELL] and sent["reasoning_effort"] == "low" and sent["verbosity"] == "high"
    assert sent["parallel_tool_calls"] is False
    assert "authorization" not in fake.requests[-1].headers  # the client's key only with forward_client_key


def test_forward_client_key_for_openai_tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeOpenAI()
    monkeypatch.setenv("DAARI_TEST_OPENAI_KEY", "sk-configured-000000")
    with serve_app_in_thread(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", forward_client_key=True, api_key_env="DAARI_TEST_OPENAI_KEY")
        with daari_in_thread(make_config(tmp_path, tiers={"L3": tier})) as server:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-client-111111", max_retries=0)
            client.chat.completions.create(model="good", messages=[{"role": "user", "content": "mine"}])
            assert fake.requests[-1].headers["authorization"] == "Bearer sk-client-111111"
            keyless = httpx.post(server.url + "/v1/chat/completions",
                                 json={"model": "good", "messages": [{"role": "user", "content": "theirs"}]})
            # Never both: a tier that forwards clients' keys does not spend the configured one for a keyless client.
            assert keyless.status_code == 401 and keyless.json()["error"]["type"] == "authentication_error"
            assert len(fake.requests) == 1
            with pytest.raises(openai.APIStatusError) as info:
                client.chat.completions.create(model="error401", messages=[{"role": "user", "content": "leak?"}])
            assert "sk-client-111111" not in str(info.value.body)
    assert "sk-client-111111" not in caplog.text and "sk-configured-000000" not in caplog.text


def test_anthropic_fields_reach_an_anthropic_upstream(tmp_path: Path) -> None:
    fake = FakeAnthropic()
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("anthropic", upstream)})
        with daari_in_thread(config) as server:
            body = {"model": "good", "max_tokens": 64, "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read"},
                                             {"type": "document", "source": {"type": "base64",
                                              "media_type": "application/pdf", "data": "JVBERi0x"}},
                                             {"type": "block_from_2031", "x": 1}]}],
                    "output_config": {"effort": "low"}, "service_tier": "auto", "metadata": {"user_id": "u"},
                    "tools": [{"name": "t", "input_schema": {"type": "object"}, "strict": True}]}
            reply = httpx.post(server.url + "/v1/messages", json=body)
            assert reply.status_code == 200, reply.text
            assert {k: v for k, v in fake.requests[-1].body.items() if k != "stream"} == body
            other_effort = httpx.post(server.url + "/v1/messages", json={**body, "output_config": {"effort": "high"}})
            assert other_effort.headers["x-daari-cache"] == "miss"
            other_user = httpx.post(server.url + "/v1/messages", json={**body, "metadata": {"user_id": "v"}})
            assert other_user.headers["x-daari-cache"] == "hit"
            # A part with no Anthropic equivalent, from an OpenAI client: a 400 naming it, never dropped.
            sent_before = len(fake.requests)
            audio = httpx.post(server.url + "/v1/chat/completions", json={"model": "good", "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hear"}, AUDIO]}]})
            assert audio.status_code == 400 and "input_audio" in audio.json()["error"]["message"]
            assert len(fake.requests) == sent_before


def test_parts_only_an_openai_tier_reads_never_reach_a_local_tier(tmp_path: Path) -> None:
    ask = {"model": "good", "messages": [{"role": "user", "content": [{"type": "text", "text": "hear"}, AUDIO]}]}
    ollama, oa = FakeOllama(), FakeOpenAI()
    with serve_app_in_thread(ollama) as local, serve_app_in_thread(oa) as remote:
        tiers = {"L3": upstream_tier("ollama", local), "L4": upstream_tier("openai", remote + "/v1")}
        with daari_in_thread(make_config(tmp_path / "both", tiers=tiers)) as server:
            reply = httpx.post(server.url + "/v1/chat/completions", json=ask)
            assert reply.status_code == 200 and reply.json()["daari_meta"]["tier"] == "L4"
            assert _raw_body(oa)["messages"] == ask["messages"]
        with daari_in_thread(make_config(tmp_path / "local", tiers={"L3": upstream_tier("ollama", local)})) as server:
            refused = httpx.post(server.url + "/v1/chat/completions", json=ask)
            assert refused.status_code == 400 and "input_audio" in refused.json()["error"]["message"]
    assert ollama.requests == []  # a local model never saw it
