"""Claude Code's protocol through daari: the official anthropic SDK against a running daari."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

WEATHER = {"name": "get_weather", "description": "Weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
# The fake's "tools" model also calls list_files (with empty input): a request that defines it gets a valid answer.
LIST_FILES = {"name": "list_files", "description": "The files here", "input_schema": {"type": "object"}}


@pytest.fixture
def via_openai_upstream(tmp_path: Path) -> Iterator[tuple[anthropic.Anthropic, FakeOpenAI, str]]:
    """An Anthropic client whose requests daari answers from an OpenAI-compatible tier (translation)."""
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            yield anthropic.Anthropic(base_url=server.url, api_key="sk-ant-client", max_retries=0), fake, server.url


def native_daari(tmp_path: Path, **tier: object):  # type: ignore[no-untyped-def]
    fake = FakeAnthropic()

    class Running:
        def __enter__(self):  # type: ignore[no-untyped-def]
            self._up = serve_app_in_thread(fake)
            upstream = self._up.__enter__()
            config = make_config(tmp_path, tiers={"L3": upstream_tier("anthropic", upstream, **tier)})
            self._srv = daari_in_thread(config)
            server = self._srv.__enter__()
            return anthropic.Anthropic(base_url=server.url, api_key="sk-ant-client-key", max_retries=0), fake

        def __exit__(self, *exc: object) -> None:
            self._srv.__exit__(*exc)
            self._up.__exit__(*exc)

    return Running()


def test_non_stream_and_l0_hit(via_openai_upstream) -> None:  # type: ignore[no-untyped-def]
    client, fake, _ = via_openai_upstream
    ask = {"model": "good", "max_tokens": 100, "messages": [{"role": "user", "content": "explain CRDTs"}]}
    first = client.messages.create(**ask)
    assert first.content[0].type == "text" and "CRDTs" in first.content[0].text
    assert first.stop_reason == "end_turn"
    assert first.model_extra["daari_meta"]["tier"] == "L3"
    second = client.messages.create(**ask)
    assert second.model_extra["daari_meta"]["tier"] == "L0"
    assert second.content[0].text == first.content[0].text
    assert len(fake.requests) == 1


def test_stream_accumulates_and_replays_from_l0(via_openai_upstream) -> None:  # type: ignore[no-untyped-def]
    client, fake, _ = via_openai_upstream
    ask = {"model": "good", "max_tokens": 100, "messages": [{"role": "user", "content": "stream about raft"}]}
    finals = []
    for _ in range(2):
        with client.messages.stream(**ask) as stream:
            deltas = [e for e in stream if e.type == "content_block_delta"]
            finals.append(stream.get_final_message())
        assert len(deltas) > 1
    assert finals[0].content[0].text == finals[1].content[0].text
    assert len(fake.requests) == 1


def test_tool_use_round_trip_and_repeated_turn_is_l0(via_openai_upstream) -> None:  # type: ignore[no-untyped-def]
    client, fake, _ = via_openai_upstream
    messages: list[dict] = [{"role": "user", "content": "weather in Paris?"}]
    reply = client.messages.create(model="tools", max_tokens=200, tools=[WEATHER], messages=messages)
    assert reply.stop_reason == "tool_use"
    use = next(b for b in reply.content if b.type == "tool_use")
    assert use.name == "get_weather" and use.input == {"city": "example"}
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18°C, sunny"}]},
    ]
    final = client.messages.create(model="tools", max_tokens=200, tools=[WEATHER], messages=messages)
    assert "18°C, sunny" in final.content[0].text
    assert final.model_extra["daari_meta"]["agent_turn"] is True
    # The tool result went upstream as an OpenAI tool message with the same call id.
    sent = fake.requests[-1].body["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": use.id, "content": "18°C, sunny"}
    again = client.messages.create(model="tools", max_tokens=200, tools=[WEATHER], messages=messages)
    assert again.model_extra["daari_meta"]["tier"] == "L0"
    messages[-1]["content"][0]["content"] = "25°C, cloudy"
    changed = client.messages.create(model="tools", max_tokens=200, tools=[WEATHER], messages=messages)
    assert changed.model_extra["daari_meta"]["tier"] == "L3"
    assert "25°C" in changed.content[0].text


def test_openai_stream_serves_anthropic_request_with_the_same_key(via_openai_upstream) -> None:  # type: ignore[no-untyped-def]
    client, fake, url = via_openai_upstream
    oa = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    chunks = list(oa.chat.completions.create(model="good", max_tokens=100, stream=True,
                                             messages=[{"role": "user", "content": "shared key"}]))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reply = client.messages.create(model="good", max_tokens=100,
                                   messages=[{"role": "user", "content": "shared key"}])
    assert reply.model_extra["daari_meta"]["tier"] == "L0"
    assert reply.content[0].text == streamed
    assert len(fake.requests) == 1


def test_errors_in_anthropic_shape(via_openai_upstream) -> None:  # type: ignore[no-untyped-def]
    client, _, url = via_openai_upstream
    no_max_tokens = httpx.post(url + "/v1/messages",
                               json={"model": "good", "messages": [{"role": "user", "content": "x"}]})
    assert no_max_tokens.status_code == 400
    assert no_max_tokens.json()["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in no_max_tokens.json()["error"]["message"]
    missing = httpx.post(url + "/v1/messages/nope", json={})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    as_json = {"content-type": "application/json"}
    big = httpx.post(url + "/v1/messages", content=b"x" * (9 * 1024 * 1024), headers=as_json)
    assert big.status_code == 413 and big.json()["error"]["type"] == "request_too_large"
    bad_json = httpx.post(url + "/v1/messages", content=b"{", headers=as_json)
    assert bad_json.status_code == 400 and bad_json.json()["type"] == "error"


def test_unknown_beta_header_is_never_a_400_and_count_tokens_and_models(via_openai_upstream) -> None:  # type: ignore[no-untyped-def]
    client, _, url = via_openai_upstream
    reply = client.messages.create(
        model="good", max_tokens=50, messages=[{"role": "user", "content": "hi there"}],
        extra_headers={"anthropic-beta": "some-future-feature-2031-01-01,interleaved-thinking-2025-05-14"})
    assert reply.content
    counted = client.messages.count_tokens(model="good", messages=[{"role": "user", "content": "count me " * 20}])
    assert counted.input_tokens > 20
    models = httpx.get(url + "/v1/models", headers={"anthropic-version": "2023-06-01"}).json()
    assert models["data"][0]["type"] == "model" and "has_more" in models


def test_native_stream_passes_thinking_and_tool_input_through(tmp_path: Path) -> None:
    with native_daari(tmp_path) as (client, fake):
        ask = {"model": "tools", "max_tokens": 2048, "tools": [WEATHER, LIST_FILES],
               "thinking": {"type": "enabled", "budget_tokens": 1024},
               "messages": [{"role": "user", "content": "weather?"}]}
        with client.messages.stream(**ask, extra_headers={"anthropic-beta": "fine-grained-tool-streaming-2025-05-14"}) \
                as stream:
            kinds = [e.delta.type for e in stream if e.type == "content_block_delta"]
            final = stream.get_final_message()
        assert "thinking_delta" in kinds and "input_json_delta" in kinds
        assert [b.type for b in final.content] == ["thinking", "text", "tool_use", "tool_use"]
        assert final.content[2].input == {"city": "Paris", "unit": "°C"}
        assert final.content[3].input == {}
        sent = fake.requests[-1]
        assert sent.headers["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14"
        # The client's key is not forwarded unless configured.
        assert "x-api-key" not in sent.headers and "authorization" not in sent.headers
        # The repeated turn replays from L0 as a real event stream, tool input in input_json_delta pieces.
        with client.messages.stream(**ask) as stream:
            events = list(stream)
            again = stream.get_final_message()
        assert len(fake.requests) == 1
        assert sum(1 for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta") > 1
        assert [b.input for b in again.content if b.type == "tool_use"] == [{"city": "Paris", "unit": "°C"}, {}]
        # The thinking block and its signature survive the replay: an agent loop with extended thinking must
        # send them back on its next turn, and the real API refuses a turn that lost them.
        assert [b.type for b in again.content] == ["thinking", "text", "tool_use", "tool_use"]
        assert again.content[0].thinking == final.content[0].thinking
        assert again.content[0].signature == final.content[0].signature
        whole = client.messages.create(**ask)
        assert whole.model_extra["daari_meta"]["tier"] == "L0"
        assert [b.type for b in whole.content] == ["thinking", "text", "tool_use", "tool_use"]
        assert whole.content[0].signature == final.content[0].signature
        assert whole.stop_reason == "tool_use"
        assert len(fake.requests) == 1


def test_client_key_forwarded_only_when_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ask = {"model": "good", "max_tokens": 50, "messages": [{"role": "user", "content": "key test"}]}
    with native_daari(tmp_path / "a", forward_client_key=True) as (client, fake):
        client.messages.create(**ask)
        sent = fake.requests[-1].headers
        # Current SDKs send the key as a bearer token, older ones as x-api-key: whichever came is forwarded.
        assert sent.get("x-api-key") == "sk-ant-client-key" or sent["authorization"] == "Bearer sk-ant-client-key"
    monkeypatch.setenv("DAARI_TEST_ANTHROPIC_KEY", "sk-ant-configured")
    with native_daari(tmp_path / "b", api_key_env="DAARI_TEST_ANTHROPIC_KEY") as (client, fake):
        reply = client.messages.create(**ask)
        assert fake.requests[-1].headers["x-api-key"] == "sk-ant-configured"
        assert "authorization" not in fake.requests[-1].headers
        assert "sk-ant" not in str(reply.model_extra["daari_meta"])


def test_upstream_overload_is_529_for_anthropic_clients(tmp_path: Path) -> None:
    with native_daari(tmp_path, model="error529", retry={"max_retries": 0}) as (client, _):
        with pytest.raises(anthropic.APIStatusError) as info:
            client.messages.create(model="x", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        assert info.value.status_code == 529
        assert info.value.body["error"]["type"] == "overloaded_error"
