"""daari end to end for OpenAI clients: the official SDK against a running daari and a fake upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI()


@pytest.fixture
def client(tmp_path: Path, fake: FakeOpenAI) -> Iterator[openai.OpenAI]:
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            yield openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test-not-a-real-key", max_retries=0)


def ask(client: openai.OpenAI, text: str, **kw: object):  # type: ignore[no-untyped-def]
    return client.chat.completions.with_raw_response.create(
        model=kw.pop("model", "good"), messages=[{"role": "user", "content": text}], **kw)


def test_non_stream_then_repeat_is_an_l0_hit(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    first = ask(client, "what is a monad?")
    reply = first.parse()
    assert first.headers["x-daari-tier"] == "L3" and first.headers["x-daari-cache"] == "miss"
    assert "monad" in reply.choices[0].message.content
    meta = reply.model_extra["daari_meta"]
    assert meta["tier"] == "L3" and meta["cache_hit"] is False and meta["executor"] == "openai"
    second = ask(client, "what is a monad?")
    again = second.parse()
    assert second.headers["x-daari-cache"] == "hit"
    assert again.model_extra["daari_meta"]["tier"] == "L0"
    assert again.model_extra["daari_meta"]["cache_hit"] is True
    # A hit reports the classification made when the answer was stored.
    for field in ("rule_id", "task_type", "ceiling"):
        assert again.model_extra["daari_meta"][field] == meta[field] is not None
    assert again.choices[0].message.content == reply.choices[0].message.content
    assert len(fake.requests) == 1  # the repeat never reached the upstream


def test_no_cache_header_skips_read_and_write(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    for _ in range(2):
        raw = ask(client, "uncached question", extra_headers={"X-Daari-No-Cache": "true"})
        assert raw.headers["x-daari-cache"] == "bypass"
    assert len(fake.requests) == 2
    # Nothing was written either: the first cached call is a miss.
    assert ask(client, "uncached question").headers["x-daari-cache"] == "miss"


def test_stream_with_usage_and_meta_then_replayed_from_l0(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    def stream() -> tuple[str, list[object]]:
        chunks = list(client.chat.completions.create(
            model="good", messages=[{"role": "user", "content": "stream me a story"}], stream=True,
            stream_options={"include_usage": True}))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return text, chunks

    text, chunks = stream()
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert chunks[-1].model_extra["daari_meta"]["tier"] == "L3"
    replay_text, replay_chunks = stream()
    assert replay_text == text
    assert len([c for c in replay_chunks if c.choices and c.choices[0].delta.content]) > 1
    assert replay_chunks[-1].model_extra["daari_meta"]["tier"] == "L0"
    assert replay_chunks[-1].usage is not None
    assert len(fake.requests) == 1


def test_stored_stream_serves_non_stream_and_back(client: openai.OpenAI) -> None:
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="good", messages=[{"role": "user", "content": "both ways"}], stream=True) if c.choices)
    whole = ask(client, "both ways").parse()
    assert whole.model_extra["daari_meta"]["tier"] == "L0"
    assert whole.choices[0].message.content == streamed


def test_tools_pass_through_and_tool_calls_come_back(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    reply = client.chat.completions.create(
        model="tools", messages=[{"role": "user", "content": "weather in Paris?"}], tools=[WEATHER_TOOL])
    call = reply.choices[0].message.tool_calls[0]
    assert reply.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and call.id
    assert fake.requests[-1].body["tools"][0]["function"]["name"] == "get_weather"
    assert reply.model_extra["daari_meta"]["agent_turn"] is True


def test_bad_input_gets_openai_error_shapes(client: openai.OpenAI) -> None:
    base = str(client.base_url).rstrip("/")
    cases = [
        ("POST", "/chat/completions", b"{not json", 400),
        ("POST", "/chat/completions", b'{"model": "m"}', 400),
        ("POST", "/chat/completions", b'{"model": "m", "messages": "hi"}', 400),
        ("POST", "/chat/completions", b'{"model": "m", "messages": []}', 400),
        ("POST", "/chat/completions", b'{"model": "m", "messages": [{"role": "wizard", "content": "x"}]}', 400),
        ("POST", "/chat/completions",
         b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', 400),
        ("POST", "/chat/completions", b'{"model": "m", "messages": [{"role": "user", "content": 5}]}', 400),
        ("POST", "/nope", b"{}", 404),
        ("GET", "/chat/completions", b"", 405),
    ]
    for method, path, body, status in cases:
        response = httpx.request(method, base + path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == status, (path, body, response.text)
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["message"] and "Traceback" not in response.text
        if status == 405:
            assert response.headers["allow"] == "POST"


def test_body_over_the_limit_is_413(client: openai.OpenAI) -> None:
    base = str(client.base_url).rstrip("/")
    big = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * (9 * 1024 * 1024) + b'"}]}'
    response = httpx.post(base + "/chat/completions", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_invalid_tier_override_is_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, "hi", extra_headers={"X-Daari-Tier-Override": "L9"})
    assert "X-Daari-Tier-Override" in str(info.value)


def test_models_and_config_and_health(client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert "daari" in ids
    assert client.models.retrieve("qwen2.5:3b").id == "qwen2.5:3b"
    base = str(client.base_url).rstrip("/").removesuffix("/v1")
    config = httpx.get(base + "/v1/daari/config").json()
    assert config["tiers"]["L3"]["executor"] == "openai"
    health = httpx.get(base + "/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"


def test_json_answers_declare_their_length(client: openai.OpenAI) -> None:
    """A JSON body (a miss, a hit, an error) goes out with Content-Length, not chunk-framed, and without a
    Server header naming the HTTP server."""
    with httpx.Client(base_url=str(client.base_url)) as http:
        answers = [http.post("chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
                   for _ in range(2)]
        answers.append(http.post("chat/completions", json={"model": "m"}))
    assert [a.status_code for a in answers] == [200, 200, 400]
    assert answers[1].headers["x-daari-cache"] == "hit"
    for answer in answers:
        assert "transfer-encoding" not in answer.headers
        assert int(answer.headers["content-length"]) == len(answer.content) > 0
        assert "server" not in answer.headers and "date" in answer.headers
