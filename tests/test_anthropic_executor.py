"""AnthropicExecutor against FakeAnthropic over loopback: streams, pass-through, headers, keys, failures."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from daari.config import TierConfig
from daari.errors import (
    Unauthorized,
    UpstreamError,
    UpstreamOverloaded,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamUnavailable,
)
from daari.executors.anthropic import AnthropicExecutor, messages_url
from daari.executors.http_upstream import retry_after_seconds
from daari.protocol.anthropic_wire import parse_messages_request
from daari.protocol.chat import ChatRequest, Message, ToolCall
from daari.protocol.events import (
    Event,
    Finish,
    KeepAlive,
    NativeEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    assemble,
)
from tests.fakes.anthropic_upstream import GOOD_TEXT, FakeAnthropic
from tests.fakes.serving import serve_app

CONFIG_KEY = "sk-ant-config-key-111"
CLIENT_KEY = "sk-ant-client-key-222"


@asynccontextmanager
async def upstream(**tier: Any) -> AsyncIterator[tuple[FakeAnthropic, AnthropicExecutor]]:
    fake = FakeAnthropic()
    async with serve_app(fake) as url:
        config = TierConfig(executor="anthropic", base_url=url, **tier)
        executor = AnthropicExecutor("L6", config)
        await executor.start()
        try:
            yield fake, executor
        finally:
            await executor.aclose()


def client_request(model: str = "good", stream: bool = True, headers: dict[str, str] | None = None,
                   **extra: Any) -> ChatRequest:
    body = {"model": model, "max_tokens": 100, "stream": stream,
            "messages": [{"role": "user", "content": "hello"}], **extra}
    return parse_messages_request(body, headers or {})


async def run(executor: AnthropicExecutor, request: ChatRequest) -> list[Event]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        if not isinstance(event, KeepAlive):  # "headers are in" (http_upstream.response_started)
            events.append(event)

    await executor.generate(request, emit)
    return events


def neutral(events: list[Event]) -> list[Event]:
    """The content events: no native pass-through, no keep-alives (pings, thinking)."""
    return [e for e in events if not isinstance(e, NativeEvent | KeepAlive)]


# ---------------------------------------------------------------- streams


async def test_stream_emits_native_events_each_before_its_neutral_events() -> None:
    async with upstream() as (fake, executor):
        events = await run(executor, client_request("good"))
    assert isinstance(events[0], NativeEvent) and events[0].name == "message_start"
    assert "ping" not in [e.name for e in events if isinstance(e, NativeEvent)]
    for position, event in enumerate(events):
        if isinstance(event, TextDelta):
            previous = events[position - 1]
            assert isinstance(previous, NativeEvent)
            assert previous.data["delta"] == {"type": "text_delta", "text": event.text}
    assert events[-2] == NativeEvent("anthropic", "message_stop", {"type": "message_stop"})
    completion = assemble(neutral(events))
    assert completion.text == "".join(GOOD_TEXT)
    assert completion.finish_reason == "stop"
    assert completion.usage.completion_tokens == 7 and completion.usage.prompt_tokens > 0
    assert len([e for e in events if isinstance(e, TextDelta)]) == len(GOOD_TEXT)
    assert fake.requests[0].path == "/v1/messages"


async def test_tool_calls_stream() -> None:
    async with upstream() as (_, executor):
        events = await run(executor, client_request("tools"))
    completion = assemble(neutral(events))
    assert completion.text == "Let me check."
    assert completion.tool_calls == [
        ToolCall("toolu_fake_1", "get_weather", '{"city": "Paris", "unit": "°C"}'),
        ToolCall("toolu_fake_2", "list_files", ""),
    ]
    assert completion.finish_reason == "tool_calls"
    assert [type(e) for e in neutral(events) if not isinstance(e, TextDelta)] == [
        ToolCallStart, ToolCallDelta, ToolCallDelta, ToolCallDelta, ToolCallStart, Finish]


async def test_thinking_reaches_the_native_stream_only() -> None:
    async with upstream() as (_, executor):
        thinking = {"type": "enabled", "budget_tokens": 1024}
        events = await run(executor, client_request("good", thinking=thinking))
    native_deltas = [e.data["delta"]["type"] for e in events
                     if isinstance(e, NativeEvent) and e.name == "content_block_delta"]
    assert native_deltas[:3] == ["thinking_delta", "thinking_delta", "signature_delta"]
    assert assemble(neutral(events)).text == "".join(GOOD_TEXT)


async def test_short_answer_stops_at_max_tokens() -> None:
    async with upstream() as (_, executor):
        events = await run(executor, client_request("short"))
    assert assemble(neutral(events)).finish_reason == "length"


async def test_openai_client_gets_no_native_events_and_a_translated_body() -> None:
    messages = [Message(role="system", content="be brief"), Message(role="user", content="hi")]
    request = ChatRequest(model="good", protocol="openai", stream=True, temperature=1.5, messages=messages)
    async with upstream() as (fake, executor):
        events = await run(executor, request)
    assert not any(isinstance(e, NativeEvent) for e in events)
    assert assemble(events).text == "".join(GOOD_TEXT)
    body = fake.requests[0].body
    assert body == {"model": "good", "max_tokens": 4096, "system": "be brief", "temperature": 1.0,
                    "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def test_non_stream_emits_the_whole_native_message_first() -> None:
    async with upstream() as (fake, executor):
        events = await run(executor, client_request("tools", stream=False))
    first = events[0]
    assert isinstance(first, NativeEvent) and first.name == "message"
    assert first.data["content"][1]["input"] == {"city": "Paris", "unit": "°C"}
    completion = assemble(neutral(events))
    assert completion.tool_calls[0] == ToolCall("toolu_fake_1", "get_weather", '{"city":"Paris","unit":"°C"}')
    assert completion.tool_calls[1].arguments == "{}"
    assert fake.requests[0].body["stream"] is False
    assert fake.streams_started == 0


# ---------------------------------------------------------------- what goes upstream


async def test_body_passes_through_with_the_configured_model() -> None:
    system = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    request = client_request("claude-sonnet-4-5", system=system, metadata={"user_id": "u1"},
                             tools=[{"type": "web_search_20250305", "name": "web_search"}])
    async with upstream(model="good") as (fake, executor):
        await run(executor, request)
    body = fake.requests[0].body
    assert body["model"] == "good"
    assert body["system"] == system
    assert body["metadata"] == {"user_id": "u1"}
    assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search"}]


async def test_version_and_beta_headers() -> None:
    beta = "claude-code-20250219,interleaved-thinking-2025-05-14"
    async with upstream() as (fake, executor):
        await run(executor, client_request(headers={"anthropic-beta": beta,
                                                    "anthropic-version": "2023-01-01"}))
        await run(executor, client_request())
    first, second = fake.requests
    assert first.headers["anthropic-beta"] == beta
    assert first.headers["anthropic-version"] == "2023-01-01"
    assert "anthropic-beta" not in second.headers
    assert second.headers["anthropic-version"] == "2023-06-01"


@pytest.mark.parametrize(("forward", "config_key", "client_headers", "expected"), [
    (False, True, {"x-api-key": CLIENT_KEY}, {"x-api-key": CONFIG_KEY}),
    (False, False, {"x-api-key": CLIENT_KEY}, {}),
    (True, True, {"x-api-key": CLIENT_KEY}, {"x-api-key": CLIENT_KEY}),
    (True, False, {"authorization": f"Bearer {CLIENT_KEY}"}, {"authorization": f"Bearer {CLIENT_KEY}"}),
])
async def test_which_key_goes_upstream(monkeypatch: pytest.MonkeyPatch, forward: bool, config_key: bool,
                                       client_headers: dict[str, str], expected: dict[str, str]) -> None:
    monkeypatch.setenv("DAARI_TEST_ANTHROPIC_KEY", CONFIG_KEY)
    tier: dict[str, Any] = {"forward_client_key": forward}
    if config_key:
        tier["api_key_env"] = "DAARI_TEST_ANTHROPIC_KEY"
    async with upstream(**tier) as (fake, executor):
        await run(executor, client_request(headers=client_headers))
    sent = fake.requests[0].headers
    assert {k: sent[k] for k in ("x-api-key", "authorization") if k in sent} == expected


async def test_forwarding_tier_refuses_a_request_without_a_client_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client pays on a forwarding tier: no client key is a 401, never the configured key spent for it."""
    monkeypatch.setenv("DAARI_TEST_ANTHROPIC_KEY", CONFIG_KEY)
    async with upstream(forward_client_key=True, api_key_env="DAARI_TEST_ANTHROPIC_KEY") as (fake, executor):
        with pytest.raises(Unauthorized) as info:
            await run(executor, client_request(headers={}))
    assert info.value.status == 401 and "forward_client_key" in info.value.message
    assert fake.requests == []


async def test_query_string_of_base_url_survives_and_never_shows() -> None:
    assert messages_url("https://gw.example/v1?key=abcdef") == "https://gw.example/v1/messages?key=abcdef"
    assert messages_url("https://gw.example?key=abcdef") == "https://gw.example/v1/messages?key=abcdef"


async def test_base_url_with_v1_suffix() -> None:
    assert messages_url("https://api.anthropic.com") == "https://api.anthropic.com/v1/messages"
    assert messages_url("https://api.anthropic.com/v1/") == "https://api.anthropic.com/v1/messages"
    fake = FakeAnthropic()
    async with serve_app(fake) as url:
        executor = AnthropicExecutor("L6", TierConfig(executor="anthropic", base_url=url + "/v1"))
        try:
            events = await run(executor, client_request())
        finally:
            await executor.aclose()
    assert fake.requests[0].path == "/v1/messages"
    assert assemble(neutral(events)).text == "".join(GOOD_TEXT)


# ---------------------------------------------------------------- failures


async def test_rate_limited() -> None:
    async with upstream() as (_, executor):
        with pytest.raises(UpstreamRateLimited) as info:
            await run(executor, client_request("error429"))
    assert info.value.retryable is True
    assert info.value.retry_after == 2.0
    assert info.value.upstream == "L6:anthropic"
    assert info.value.anthropic_status == 429


@pytest.mark.parametrize("stream", [True, False])
async def test_overloaded(stream: bool) -> None:
    async with upstream() as (_, executor):
        with pytest.raises(UpstreamOverloaded) as info:
            await run(executor, client_request("error529", stream=stream))
    assert info.value.retryable is True
    assert info.value.upstream_status == 529
    assert info.value.anthropic_status == 529


@pytest.mark.parametrize("stream", [True, False])
async def test_client_errors_pass_through(stream: bool) -> None:
    async with upstream() as (_, executor):
        with pytest.raises(UpstreamRejected) as info:
            await run(executor, client_request("refuse", stream=stream))
    assert info.value.retryable is False
    assert (info.value.status, info.value.anthropic_type) == (400, "invalid_request_error")
    assert info.value.message == "prompt is too long"


async def test_an_echoed_key_never_reaches_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TEST_ANTHROPIC_KEY", CONFIG_KEY)
    async with upstream(api_key_env="DAARI_TEST_ANTHROPIC_KEY") as (_, executor):
        with pytest.raises(UpstreamRejected) as info:
            await run(executor, client_request("unauthorized"))
    assert info.value.status == 401 and info.value.anthropic_type == "authentication_error"
    assert CONFIG_KEY not in info.value.message and CONFIG_KEY not in str(info.value)
    assert "***" in info.value.message


async def test_connection_refused_is_unavailable_and_retryable() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    executor = AnthropicExecutor("L6", TierConfig(executor="anthropic", base_url=f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(UpstreamUnavailable) as info:
            await run(executor, client_request())
    finally:
        await executor.aclose()
    assert info.value.retryable is True


async def test_error_event_mid_stream() -> None:
    emitted: list[Event] = []

    async def emit(event: Event) -> None:
        if not isinstance(event, KeepAlive):  # "headers are in" (http_upstream.response_started)
            emitted.append(event)

    async with upstream() as (_, executor):
        with pytest.raises(UpstreamOverloaded) as info:
            await executor.generate(client_request("drop"), emit)
    assert "Overloaded" in info.value.message
    assert any(isinstance(e, TextDelta) for e in emitted)  # the failure came after content
    assert not any(isinstance(e, Finish) for e in emitted)


async def test_stream_cut_without_message_stop() -> None:
    async with upstream() as (_, executor):
        with pytest.raises(UpstreamError, match="truncated stream"):
            await run(executor, client_request("cut"))


async def test_malformed_non_stream_body() -> None:
    async with upstream() as (_, executor):
        with pytest.raises(UpstreamError, match="malformed"):
            await run(executor, client_request("cut", stream=False))


async def test_cancelling_a_hung_stream_closes_the_upstream_connection() -> None:
    async with upstream() as (fake, executor):
        started = trio.Event()

        async def emit(event: Event) -> None:
            started.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(executor.generate, client_request("hang"), emit)
            await started.wait()
            nursery.cancel_scope.cancel()
        with trio.fail_after(10):  # a guard against hanging the suite, not a timing assertion
            await fake.a_stream_closed.wait()
    assert fake.streams_started == fake.streams_closed == 1


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
