"""OpenAIExecutor against the fake OpenAI upstream over real loopback HTTP."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import trio

from daari.config import TierConfig
from daari.errors import UpstreamError, UpstreamRateLimited, UpstreamRejected, UpstreamUnavailable
from daari.executors.http_upstream import retry_after_seconds
from daari.executors.openai_compat import OpenAIExecutor, redact
from daari.protocol.chat import ChatRequest, Completion, Message, Tool
from daari.protocol.events import Event, Finish, KeepAlive, TextDelta, ToolCallStart, assemble
from tests.fakes.openai_upstream import TOKEN_LOGPROB, FakeOpenAI
from tests.fakes.serving import serve_app

KEY_ENV = "DAARI_TEST_OPENAI_KEY"
SECRET = "sk-test-0123456789abcdef"
READ_TOOL = Tool("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}},
                                              "required": ["path"]})


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeOpenAI, str]]:
    app = FakeOpenAI()
    async with serve_app(app) as base_url:
        yield app, base_url


async def started(base_url: str, **config: Any) -> OpenAIExecutor:
    executor = OpenAIExecutor("L6", TierConfig(executor="openai", base_url=f"{base_url}/v1", **config))
    await executor.start()
    return executor


@pytest.fixture
async def executor(fake: tuple[FakeOpenAI, str]) -> AsyncIterator[OpenAIExecutor]:
    ex = await started(fake[1])
    yield ex
    await ex.aclose()


def chat(model: str, stream: bool = False, **fields: Any) -> ChatRequest:
    messages = fields.pop("messages", [Message("user", "How do I list files?")])
    return ChatRequest(messages=messages, model=model, stream=stream, **fields)


async def run(executor: OpenAIExecutor, request: ChatRequest) -> list[Event]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        if not isinstance(event, KeepAlive):  # "headers are in" (http_upstream.response_started)
            events.append(event)

    await executor.generate(request, emit)
    return events


async def answer(executor: OpenAIExecutor, request: ChatRequest) -> Completion:
    return assemble(await run(executor, request))


async def wait_for(condition: Callable[[], bool]) -> None:
    with trio.fail_after(10):  # a guard against hanging, not a timing assertion
        # The fake's counters are plain ints in another task: polling is the simple way to watch them.
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.01)


async def test_non_stream_answer(fake: tuple[FakeOpenAI, str], executor: OpenAIExecutor) -> None:
    completion = await answer(executor, chat("good"))
    assert completion.text.startswith("Here is a careful answer") and len(completion.text) >= 40
    assert completion.finish_reason == "stop" and completion.usage.completion_tokens > 0
    assert completion.model == "good"
    sent = fake[0].requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["stream"] is False and "stream_options" not in sent.body
    assert sent.body["messages"] == [{"role": "user", "content": "How do I list files?"}]


async def test_stream_answer_arrives_in_pieces_with_usage(fake: tuple[FakeOpenAI, str],
                                                          executor: OpenAIExecutor) -> None:
    events = await run(executor, chat("good", stream=True))
    assert sum(isinstance(e, TextDelta) for e in events) > 3
    assert isinstance(events[-1], Finish) and sum(isinstance(e, Finish) for e in events) == 1
    assert events[-1].usage.prompt_tokens > 0 and events[-1].usage.completion_tokens > 0
    assert assemble(events).text.endswith("How do I list files?.")
    assert fake[0].requests[-1].body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [False, True])
async def test_tools_pass_through_and_tool_calls_return(fake: tuple[FakeOpenAI, str],
                                                        executor: OpenAIExecutor, stream: bool) -> None:
    completion = await answer(executor, chat("tools", stream, tools=[READ_TOOL]))
    assert completion.finish_reason == "tool_calls" and completion.text == ""
    [call] = completion.tool_calls
    assert call.name == "read_file" and json.loads(call.arguments) == {"path": "example"}
    assert fake[0].requests[-1].body["tools"] == [
        {"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                          "parameters": READ_TOOL.parameters}}]
    # The agent's next turn carries the tool result back.
    history = [Message("user", "read it"), Message("assistant", None, tool_calls=[call]),
               Message("tool", "# daari", tool_call_id=call.id)]
    final = await answer(executor, chat("tools", stream, tools=[READ_TOOL], messages=history))
    assert final.text == "The tool returned: # daari" and final.finish_reason == "stop"
    assert fake[0].requests[-1].body["messages"][1]["tool_calls"][0]["id"] == call.id


@pytest.mark.parametrize("stream", [False, True])
async def test_logprobs_feed_mean_logprob(executor: OpenAIExecutor, stream: bool) -> None:
    completion = await answer(executor, chat("good", stream, sampling={"logprobs": True}))
    assert completion.mean_logprob == pytest.approx(TOKEN_LOGPROB)


@pytest.mark.parametrize("stream", [False, True])
async def test_500_is_retryable_upstream_error(executor: OpenAIExecutor, stream: bool) -> None:
    with pytest.raises(UpstreamError) as info:
        await run(executor, chat("error500", stream))
    err = info.value
    assert type(err) is UpstreamError and err.status == 502
    assert err.retryable and err.upstream_status == 500 and err.upstream == "L6:openai"
    assert "The server had an error" in err.message


@pytest.mark.parametrize("stream", [False, True])
async def test_429_carries_retry_after(executor: OpenAIExecutor, stream: bool) -> None:
    with pytest.raises(UpstreamRateLimited) as info:
        await run(executor, chat("error429", stream))
    assert info.value.retryable and info.value.retry_after == 1.0 and info.value.status == 429


@pytest.mark.parametrize("stream", [False, True])
async def test_other_4xx_passes_status_and_message_through(executor: OpenAIExecutor, stream: bool) -> None:
    with pytest.raises(UpstreamRejected) as info:
        await run(executor, chat("error400", stream))
    assert info.value.status == 400 and not info.value.retryable
    assert "Invalid value for 'messages'" in info.value.message


@pytest.mark.parametrize("stream", [False, True])
async def test_malformed_body_is_502_not_retryable(executor: OpenAIExecutor, stream: bool) -> None:
    with pytest.raises(UpstreamError) as info:
        await run(executor, chat("malformed", stream))
    assert info.value.status == 502 and not info.value.retryable and "not JSON" in info.value.message


async def test_dropped_stream_fails_after_partial_events(executor: OpenAIExecutor) -> None:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        if not isinstance(event, KeepAlive):  # "headers are in" (http_upstream.response_started)
            events.append(event)

    with pytest.raises(UpstreamError) as info:
        await executor.generate(chat("drop", stream=True), emit)
    assert not info.value.retryable and info.value.status == 502
    assert events and all(isinstance(e, TextDelta) for e in events)


async def test_clean_end_without_finish_reason_is_truncated(executor: OpenAIExecutor) -> None:
    with pytest.raises(UpstreamError, match="truncated stream") as info:
        await run(executor, chat("truncate", stream=True))
    assert not info.value.retryable


async def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ex = await started(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(UpstreamUnavailable) as info:
            await run(ex, chat("good"))
    finally:
        await ex.aclose()
    assert info.value.retryable and info.value.status == 503


async def test_authorization_only_with_a_key(fake: tuple[FakeOpenAI, str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    app, base_url = fake
    monkeypatch.delenv(KEY_ENV, raising=False)
    for config in ({}, {"api_key_env": KEY_ENV}):  # no env name; env name whose variable is unset
        ex = await started(base_url, **config)
        await run(ex, chat("good"))
        await ex.aclose()
        assert "authorization" not in app.requests[-1].headers
    monkeypatch.setenv(KEY_ENV, SECRET)
    ex = await started(base_url, api_key_env=KEY_ENV)
    await run(ex, chat("good"))
    assert app.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in json.dumps(ex.status())
    # An upstream that echoes the key in its error must not get it to the client.
    with pytest.raises(UpstreamError) as info:
        await run(ex, chat("error401"))
    await ex.aclose()
    assert info.value.status == 502 and "api_key_env" in info.value.message
    assert SECRET not in info.value.message and SECRET not in str(info.value)


async def test_tier_model_overrides_client_model(fake: tuple[FakeOpenAI, str]) -> None:
    ex = await started(fake[1], model="short")
    completion = await answer(ex, chat("whatever-the-client-said"))
    await ex.aclose()
    assert completion.text == "ok" and fake[0].requests[-1].body["model"] == "short"
    assert ex.model_names() == ["short"]


async def test_script_queues_behaviours_and_executor_does_not_retry(fake: tuple[FakeOpenAI, str],
                                                                    executor: OpenAIExecutor) -> None:
    fake[0].script = ["error500", "refuse"]
    with pytest.raises(UpstreamError):
        await run(executor, chat("good"))
    assert len(fake[0].requests) == 1  # retries are the wrapper's job
    assert (await answer(executor, chat("good"))).text == "I cannot help with that."


@pytest.mark.parametrize(("model", "stream"), [("hang", False), ("hang_stream", True)])
async def test_cancel_closes_the_upstream_request(fake: tuple[FakeOpenAI, str], executor: OpenAIExecutor,
                                                  model: str, stream: bool) -> None:
    app = fake[0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, executor, chat(model, stream))
        await wait_for(lambda: app.active_streams == 1)
        nursery.cancel_scope.cancel()
    await wait_for(lambda: app.active_streams == 0)
    assert app.closed_streams == 1


async def test_server_that_ignores_stream_answers_json() -> None:
    async def json_only(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        body = {"choices": [{"message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}]}
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    async with serve_app(json_only) as base_url:
        ex = await started(base_url)
        completion = await answer(ex, chat("any", stream=True))
        await ex.aclose()
    assert completion.text == "whole"


async def test_fake_lists_models(fake: tuple[FakeOpenAI, str]) -> None:
    async with httpx.AsyncClient() as client:
        listing = (await client.get(f"{fake[1]}/v1/models")).json()
    assert listing["object"] == "list" and {"good", "tools", "hang"} <= {m["id"] for m in listing["data"]}


async def test_stream_tool_call_start_precedes_its_arguments(executor: OpenAIExecutor) -> None:
    events = await run(executor, chat("tools", stream=True, tools=[READ_TOOL]))
    starts = [i for i, e in enumerate(events) if isinstance(e, ToolCallStart)]
    assert starts == [0] and len(events) > 3


def test_parse_retry_after_forms() -> None:
    assert retry_after_seconds(httpx.Headers({"retry-after": "2"}), now=0) == 2.0
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"}), now=0) == 1.5
    date = "Wed, 21 Oct 2015 07:28:30 GMT"  # 1445412510
    assert retry_after_seconds(httpx.Headers({"retry-after": date}), now=1445412500) == 10.0
    assert retry_after_seconds(httpx.Headers({"retry-after": date}), now=1445412600) == 0.0
    assert retry_after_seconds(httpx.Headers({"retry-after": "soon"}), now=0) is None
    assert retry_after_seconds(httpx.Headers(), now=0) is None


def test_redact_removes_key_and_key_shapes() -> None:
    assert redact(f"bad key {SECRET}!", SECRET) == "bad key ***!"
    assert redact("Incorrect API key provided: sk-proj-abcdefgh12345.", None) == \
        "Incorrect API key provided: sk-***."
