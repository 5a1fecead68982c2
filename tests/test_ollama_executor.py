"""OllamaExecutor over loopback against FakeOllama: the stream, tool calls, request mapping, each error."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator

import pytest
import trio

from daari.config import RetryConfig, TierConfig, TimeoutsConfig
from daari.errors import InvalidRequest, UpstreamError, UpstreamTimeout, UpstreamUnavailable
from daari.executors.ollama import OllamaExecutor, chat_body, ollama_messages
from daari.executors.resilience import ResilientExecutor
from daari.protocol.chat import ChatRequest, Message, Tool, ToolCall, Usage
from daari.protocol.events import Event, Finish, KeepAlive, TextDelta, ToolCallDelta, ToolCallStart, assemble
from tests.fakes.ollama_upstream import MODELS, FakeOllama
from tests.fakes.serving import serve_app

WEATHER = Tool("get_weather", "Current weather for a city",
               {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeOllama, str]]:
    app = FakeOllama()
    async with serve_app(app) as base_url:
        yield app, base_url


def config(base_url: str, **overrides: object) -> TierConfig:
    return TierConfig(executor="ollama", base_url=base_url, **overrides)  # type: ignore[arg-type]


async def run(executor: OllamaExecutor | ResilientExecutor, request: ChatRequest) -> list[Event]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        if not isinstance(event, KeepAlive):  # "headers are in" (http_upstream.response_started)
            events.append(event)

    try:
        await executor.generate(request, emit)
    finally:
        await executor.aclose()
    return events


def ask(model: str = "good", text: str = "hi", **kw: object) -> ChatRequest:
    return ChatRequest(messages=[Message("user", text)], model=model, **kw)  # type: ignore[arg-type]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_text_stream_becomes_deltas_and_finish(fake: tuple[FakeOllama, str]) -> None:
    app, base_url = fake
    events = await run(OllamaExecutor("L4", config(base_url)), ask("good"))
    assert events == [
        TextDelta("Hello", logprob=-0.5, tokens=1),
        TextDelta(" there", logprob=-0.5, tokens=1),
        TextDelta("!", logprob=-0.5, tokens=1),
        Finish("stop", Usage(prompt_tokens=12, completion_tokens=3), model="good"),
    ]
    completion = assemble(events)
    assert completion.text == "Hello there!"
    assert completion.mean_logprob == pytest.approx(-0.5)
    assert app.requests[0]["stream"] is True
    assert app.requests[0]["logprobs"] is True


async def test_refusal_and_length_finish(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    refused = assemble(await run(OllamaExecutor("L4", config(base_url)), ask("refuse")))
    assert refused.text == "I can't help with that." and refused.finish_reason == "stop"
    short = assemble(await run(OllamaExecutor("L4", config(base_url)), ask("short")))
    assert short.finish_reason == "length"
    assert short.usage == Usage(12, 2)


async def test_tool_call_with_object_arguments(fake: tuple[FakeOllama, str]) -> None:
    app, base_url = fake
    events = await run(OllamaExecutor("L4", config(base_url)), ask("tools", tools=[WEATHER]))
    start, delta, finish = events
    assert isinstance(start, ToolCallStart) and start.index == 0 and start.name == "get_weather"
    assert start.id.startswith("call_") and len(start.id) > len("call_")
    assert isinstance(delta, ToolCallDelta) and delta.index == 0
    assert json.loads(delta.arguments) == {"city": "Paris", "unit": "celsius"}
    assert isinstance(finish, Finish) and finish.reason == "tool_calls"
    assert app.requests[0]["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city",
        "parameters": WEATHER.parameters}}]


async def test_generated_tool_call_ids_are_unique(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    first = await run(OllamaExecutor("L4", config(base_url)), ask("tools", tools=[WEATHER]))
    second = await run(OllamaExecutor("L4", config(base_url)), ask("tools", tools=[WEATHER]))
    assert isinstance(first[0], ToolCallStart) and isinstance(second[0], ToolCallStart)
    assert first[0].id != second[0].id


async def test_request_body_maps_model_options_and_keep_alive(fake: tuple[FakeOllama, str]) -> None:
    app, base_url = fake
    request = ask("client-model", temperature=0.2,
                  sampling={"top_p": 0.9, "top_k": 40, "seed": 7, "max_tokens": 64, "stop": ["END", "###"]})
    await run(OllamaExecutor("L4", config(base_url, model="good:latest", keep_alive="10m")), request)
    body = app.requests[0]
    assert body["model"] == "good:latest"  # the tier's model wins over the client's
    assert body["keep_alive"] == "10m"
    # num_ctx: the prompt's need plus the answer's 64 tokens, a multiple of 1024 within the model's window
    assert body["options"] == {"temperature": 0.2, "top_p": 0.9, "top_k": 40, "seed": 7, "num_predict": 64,
                               "stop": ["END", "###"], "num_ctx": 1024}
    assert body["messages"] == [{"role": "user", "content": "hi"}]


async def test_client_model_and_default_num_predict(fake: tuple[FakeOllama, str]) -> None:
    app, base_url = fake
    await run(OllamaExecutor("L4", config(base_url, max_tokens=321)), ask("good"))
    body = app.requests[0]
    assert body["model"] == "good"
    assert body["options"] == {"num_predict": 321, "num_ctx": 1024}
    assert "keep_alive" not in body and "tools" not in body and "format" not in body


def test_messages_map_tool_history_and_images() -> None:
    messages = [
        Message("system", "be brief"),
        Message("user", [{"type": "text", "text": "what is this?"},
                         {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
                         {"type": "image", "url": "data:image/jpeg;base64,/9j/4AAQ"}]),
        Message("assistant", None, tool_calls=[ToolCall("call_1", "get_weather", '{"city": "Oslo"}')]),
        Message("tool", "12C", tool_call_id="call_1"),
    ]
    assert ollama_messages(messages) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what is this?", "images": ["iVBORw0KGgo=", "/9j/4AAQ"]},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1",
                         "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
        {"role": "tool", "content": "12C", "tool_name": "get_weather"},
    ]


def test_unparseable_tool_arguments_become_an_empty_object() -> None:
    messages = [Message("assistant", "", tool_calls=[ToolCall("c", "f", "{not json")])]
    assert ollama_messages(messages)[0]["tool_calls"][0]["function"]["arguments"] == {}


def test_image_urls_are_rejected() -> None:
    with pytest.raises(InvalidRequest, match="base64"):
        ollama_messages([Message("user", [{"type": "image", "url": "https://example.com/cat.png"}])])


def test_response_format_and_tool_choice_none() -> None:
    base = TierConfig(executor="ollama", base_url="http://x")
    schema = {"type": "object", "properties": {"age": {"type": "integer"}}}
    assert chat_body(ask(sampling={"response_format": {"type": "json_object"}}), base)["format"] == "json"
    as_schema = ask(sampling={"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}})
    assert chat_body(as_schema, base)["format"] == schema
    assert "format" not in chat_body(ask(sampling={"response_format": {"type": "text"}}), base)
    assert "tools" not in chat_body(ask(tools=[WEATHER], sampling={"tool_choice": "none"}), base)
    assert chat_body(ask(sampling={"top_logprobs": 3}), base)["top_logprobs"] == 3


async def test_500_is_a_retryable_upstream_error(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    with pytest.raises(UpstreamError) as info:
        await run(OllamaExecutor("L4", config(base_url)), ask("error500"))
    assert info.value.retryable is True
    assert info.value.upstream_status == 500
    assert "llama runner process has terminated" in info.value.message


async def test_missing_model_says_to_pull_it(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    with pytest.raises(UpstreamError) as info:
        await run(OllamaExecutor("L4", config(base_url)), ask("missing"))
    assert info.value.status == 502
    assert info.value.retryable is False
    assert "model 'missing' not found" in info.value.message
    assert "ollama pull missing" in info.value.message


async def test_malformed_line(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    with pytest.raises(UpstreamError, match="malformed NDJSON"):
        await run(OllamaExecutor("L4", config(base_url)), ask("malformed"))


async def test_error_line_mid_stream(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    with pytest.raises(UpstreamError, match="error was encountered while running the model"):
        await run(OllamaExecutor("L4", config(base_url)), ask("stream_error"))


async def test_dropped_connection_is_a_truncated_stream(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    events: list[Event] = []

    async def emit(event: Event) -> None:
        if not isinstance(event, KeepAlive):  # "headers are in" (http_upstream.response_started)
            events.append(event)

    executor = OllamaExecutor("L4", config(base_url))
    with pytest.raises(UpstreamError, match="truncated stream"):
        await executor.generate(ask("drop"), emit)
    await executor.aclose()
    assert events == [TextDelta("Hel", logprob=-0.5, tokens=1)]


async def test_connection_refused_is_unavailable_and_retryable() -> None:
    executor = OllamaExecutor("L4", config(f"http://user:pw@127.0.0.1:{closed_port()}"))
    with pytest.raises(UpstreamUnavailable) as info:
        await run(executor, ask("good"))
    assert info.value.retryable is True
    assert "pw" not in info.value.message


async def test_list_models(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    executor = OllamaExecutor("L4", config(base_url, model="good:latest"))
    assert await executor.list_models() == MODELS
    assert executor.model_names() == ["good:latest"]
    await executor.aclose()
    assert OllamaExecutor("L4", config(base_url)).model_names() == []


async def test_list_models_failure_is_empty() -> None:
    executor = OllamaExecutor("L4", config(f"http://127.0.0.1:{closed_port()}"))
    assert await executor.list_models() == []
    await executor.aclose()


async def test_resilient_ollama_retries_a_500(fake: tuple[FakeOllama, str]) -> None:
    app, base_url = fake
    tier = config(base_url, retry=RetryConfig(max_retries=1, backoff_initial_s=0.01))
    events = await run(ResilientExecutor(OllamaExecutor("L4", tier)), ask("flaky"))
    assert assemble(events).text == "Hello there!"
    assert len(app.requests) == 2


async def test_first_byte_timeout_closes_the_upstream_stream(fake: tuple[FakeOllama, str]) -> None:
    app, base_url = fake
    tier = config(base_url, retry=RetryConfig(max_retries=0),
                  timeouts=TimeoutsConfig(connect_s=5.0, first_byte_s=0.3, idle_s=5.0, total_s=30.0))
    executor = ResilientExecutor(OllamaExecutor("L4", tier))

    async def emit(event: Event) -> None:
        raise AssertionError("a hanging upstream emits nothing")

    with pytest.raises(UpstreamTimeout, match="first_byte"):
        await executor.generate(ask("hang"), emit)
    assert app.hanging.is_set()
    # The client stays open: the cancelled `async with client.stream` alone must close the connection.
    with trio.fail_after(5):
        await app.client_closed.wait()
    assert app.streams_closed_by_client == 1
    await executor.aclose()


async def test_start_is_reentrant_after_aclose(fake: tuple[FakeOllama, str]) -> None:
    _, base_url = fake
    executor = OllamaExecutor("L4", config(base_url))
    async with trio.open_nursery() as nursery:
        await executor.start(nursery)
        assert executor.status()["started"] is True
        await executor.aclose()
        assert executor.status()["started"] is False
        await executor.start(nursery)
    events = await run(executor, ask("good"))
    assert assemble(events).text == "Hello there!"
