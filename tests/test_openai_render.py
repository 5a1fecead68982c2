"""OpenAI rendering (completion, stream chunks, errors, models) and upstream decoding into events."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from daari.errors import InvalidRequest, UpstreamError, UpstreamTimeout
from daari.protocol.chat import ChatRequest, Completion, Message, ToolCall, Usage
from daari.protocol.events import (
    Event,
    Finish,
    NativeEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    assemble,
    replay,
)
from daari.protocol.openai_render import (
    ChunkDecoder,
    OpenAIStreamRenderer,
    events_from_response,
    render_completion,
    render_error,
    render_models,
)
from daari.protocol.sse import SSEDecoder
from tests.fakes.serving import serve_app_in_thread

META = {"tier": "L3", "cache": "miss"}
CALL = ToolCall("call_1", "read_file", '{"path": "README.md"}')


def request(include_usage: bool = False, stream: bool = True) -> ChatRequest:
    return ChatRequest(messages=[Message("user", "hi")], model="gpt-4o", stream=stream,
                       include_usage=include_usage)


def chunks_of(raw: list[bytes]) -> list[Any]:
    """The data of each SSE event: parsed JSON, or the literal "[DONE]"."""
    decoder = SSEDecoder()
    events = [e for piece in raw for e in decoder.feed(piece)]
    assert not decoder.pending
    return [e.data if e.data == "[DONE]" else json.loads(e.data) for e in events]


def render_stream(events: list[Event], req: ChatRequest, meta: dict[str, Any] = META) -> list[bytes]:
    renderer = OpenAIStreamRenderer(req, "chatcmpl-1", 1700)
    out = renderer.start()
    for ev in events:
        out += renderer.event(ev)
    return out + renderer.finish(meta)


# --- whole responses --------------------------------------------------------------------------------------

def test_render_completion_text() -> None:
    completion = Completion(text="Hello.", finish_reason="stop_sequence", stop_sequence="###",
                            usage=Usage(3, 2), model="smollm2")
    assert render_completion(completion, request(stream=False), META, "chatcmpl-9", 1700) == {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "created": 1700,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello.", "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        "daari_meta": META,
    }


def test_render_completion_tool_calls_only_has_null_content() -> None:
    completion = Completion(tool_calls=[CALL], finish_reason="tool_calls")
    choice = render_completion(completion, request(stream=False), META, "x", 1)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": CALL.arguments}}]


def test_render_error_and_models() -> None:
    status, body = render_error(InvalidRequest("'messages' must be a list", param="messages"))
    assert status == 400
    assert body == {"error": {"message": "'messages' must be a list", "type": "invalid_request_error",
                              "param": "messages", "code": None}}
    status, body = render_error(UpstreamTimeout("no first byte in 60s"))
    assert status == 504
    assert body["error"]["type"] == "timeout_error" and body["error"]["code"] == "upstream_timeout"
    assert render_models(["daari", "L6"], 5) == {"object": "list", "data": [
        {"id": "daari", "object": "model", "created": 5, "owned_by": "daari"},
        {"id": "L6", "object": "model", "created": 5, "owned_by": "daari"}]}


# --- stream rendering -------------------------------------------------------------------------------------

def test_stream_text_without_usage() -> None:
    chunks = chunks_of(render_stream([TextDelta("Hel"), TextDelta(""), TextDelta("lo"),
                                      NativeEvent("anthropic", "ping", {}), Finish("length", Usage(1, 2))],
                                     request()))
    assert chunks[-1] == "[DONE]"
    data = chunks[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == "chatcmpl-1" and c["created"] == 1700
               and c["model"] == "gpt-4o" and "usage" not in c for c in data)
    assert [c["choices"][0]["delta"] for c in data] == [
        {"role": "assistant", "content": ""}, {"content": "Hel"}, {"content": "lo"}, {}]
    assert [c["choices"][0]["finish_reason"] for c in data] == [None, None, None, "length"]
    assert data[-1]["daari_meta"] == META
    assert all("daari_meta" not in c for c in data[:-1])


def test_stream_with_usage_and_tool_calls() -> None:
    events = [TextDelta("Let me look."), ToolCallStart(1, "call_1", "read_file"),
              ToolCallDelta(1, '{"path": '), ToolCallDelta(1, '"README.md"}'),
              ToolCallStart(3, "call_2", "ls"), ToolCallDelta(3, "{}"),
              Finish("tool_calls", Usage(10, 7))]
    chunks = chunks_of(render_stream(events, request(include_usage=True)))
    assert chunks[-1] == "[DONE]"
    *body, finish, usage = chunks[:-1]
    assert all(c["usage"] is None for c in [*body, finish])
    deltas = [c["choices"][0]["delta"] for c in body]
    # Tool indexes are renumbered densely: neutral 1 and 3 become 0 and 1.
    assert deltas[2:] == [
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                         "function": {"name": "read_file", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"README.md"}'}}]},
        {"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                         "function": {"name": "ls", "arguments": ""}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]},
    ]
    assert finish["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}
    assert "daari_meta" not in finish
    assert usage["choices"] == [] and usage["daari_meta"] == META
    assert usage["usage"] == {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}


def test_stream_error_is_explicit_and_has_no_done() -> None:
    renderer = OpenAIStreamRenderer(request(), "chatcmpl-1", 1700)
    out = renderer.start() + renderer.event(TextDelta("partial"))
    out += renderer.error(UpstreamError("upstream L6 broke off the response"), META)
    chunks = chunks_of(out)
    assert "[DONE]" not in chunks
    assert all(c.get("choices", [{}])[0].get("finish_reason") is None for c in chunks[:-1])
    assert chunks[-1] == {"error": {"message": "upstream L6 broke off the response", "type": "server_error",
                                    "param": None, "code": "upstream_error"}, "daari_meta": META}


def test_rendered_stream_decodes_back_to_the_same_completion() -> None:
    completion = Completion(text="The answer is in the README file, section two.", tool_calls=[CALL],
                            finish_reason="tool_calls", usage=Usage(5, 9), model="m")
    chunks = chunks_of(render_stream(list(replay(completion)), request(include_usage=True)))
    decoder = ChunkDecoder()
    events = [ev for c in chunks[:-1] for ev in decoder.feed(c)] + decoder.end()
    decoded = assemble(events)
    assert (decoded.text, decoded.tool_calls, decoded.finish_reason, decoded.usage) == \
        (completion.text, completion.tool_calls, "tool_calls", Usage(5, 9))


# --- the official SDK reads what daari renders ------------------------------------------------------------

class CannedApp:
    """Serves one canned response (SSE bytes or a JSON body) to any POST."""

    def __init__(self, payload: list[bytes] | dict[str, Any]) -> None:
        self.payload = payload

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        stream = isinstance(self.payload, list)
        kind = b"text/event-stream" if stream else b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
        for piece in self.payload if isinstance(self.payload, list) else [json.dumps(self.payload).encode()]:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def sdk(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)


def test_openai_sdk_reads_rendered_stream_with_tools_usage_and_meta() -> None:
    events = [TextDelta("Checking."), ToolCallStart(0, "call_1", "read_file"),
              ToolCallDelta(0, '{"path": "README.md"}'), Finish("tool_calls", Usage(4, 6))]
    with serve_app_in_thread(CannedApp(render_stream(events, request(include_usage=True)))) as url:
        chunks = list(sdk(url).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True,
            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert text == "Checking."
    assert calls[0].id == "call_1" and calls[0].function.name == "read_file"
    assert "".join(tc.function.arguments or "" for tc in calls) == '{"path": "README.md"}'
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 10
    assert chunks[-1].model_extra == {"daari_meta": META}


def test_openai_sdk_raises_on_rendered_error_event() -> None:
    renderer = OpenAIStreamRenderer(request(), "chatcmpl-1", 1700)
    raw = renderer.start() + renderer.event(TextDelta("partial")) + \
        renderer.error(UpstreamError("upstream went away"), META)
    with serve_app_in_thread(CannedApp(raw)) as url:
        stream = sdk(url).chat.completions.create(model="gpt-4o", stream=True,
                                                  messages=[{"role": "user", "content": "hi"}])
        seen: list[str] = []
        with pytest.raises(openai.APIError) as info:
            for chunk in stream:
                seen.append(chunk.choices[0].delta.content or "")
    assert seen == ["", "partial"]
    assert info.value.message == "upstream went away"
    assert info.value.code == "upstream_error" and info.value.type == "server_error"


def test_openai_sdk_reads_rendered_completion() -> None:
    completion = Completion(text="", tool_calls=[CALL], finish_reason="tool_calls", usage=Usage(2, 3))
    body = render_completion(completion, request(stream=False), META, "chatcmpl-2", 1700)
    with serve_app_in_thread(CannedApp(body)) as url:
        result = sdk(url).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert result.choices[0].message.tool_calls[0].function.arguments == CALL.arguments
    assert result.choices[0].message.content is None
    assert result.usage is not None and result.usage.total_tokens == 5
    assert result.model_extra == {"daari_meta": META}


# --- upstream decoding ------------------------------------------------------------------------------------

def upstream_response(message: dict[str, Any], finish: Any = "stop", **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-u", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish,
                         **extra}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}


def test_events_from_response_text_with_logprobs() -> None:
    logprobs = {"content": [{"token": "Hi", "logprob": -0.5}, {"token": "!", "logprob": -0.25}]}
    events = events_from_response(upstream_response({"content": "Hi!"}, logprobs=logprobs))
    assert events == [TextDelta("Hi!", logprob=-0.75, tokens=2),
                      Finish("stop", Usage(9, 4), model="gpt-4o-2024")]
    assert assemble(events).mean_logprob == pytest.approx(-0.375)


def test_events_from_response_tool_calls() -> None:
    tool_calls = [{"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": '{"d":"."}'}},
                  {"id": "call_b", "type": "function", "function": {"name": "pwd", "arguments": ""}}]
    message = {"content": None, "tool_calls": tool_calls}
    events = events_from_response(upstream_response(message, "tool_calls"))
    assert events == [ToolCallStart(0, "call_a", "ls"), ToolCallDelta(0, '{"d":"."}'),
                      ToolCallStart(1, "call_b", "pwd"),
                      Finish("tool_calls", Usage(9, 4), model="gpt-4o-2024")]


@pytest.mark.parametrize(("upstream", "ours"), [
    ("stop", "stop"), ("length", "length"), ("content_filter", "content_filter"), (None, "stop"),
    ("function_call", "tool_calls"), ("eos", "stop"),
])
def test_finish_reason_mapping(upstream: object, ours: str) -> None:
    assert events_from_response(upstream_response({"content": "x"}, upstream))[-1].reason == ours


def test_stop_with_tool_calls_reads_as_tool_calls() -> None:
    calls = [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    assert events_from_response(upstream_response({"tool_calls": calls}, "stop"))[-1].reason == "tool_calls"


@pytest.mark.parametrize("body", [
    [],
    {"choices": []},
    {"choices": "x"},
    {"choices": [{"message": "hello"}]},
    {"choices": [{"message": {"content": 5}}]},
    {"choices": [{"message": {"content": "x", "tool_calls": [{"id": "c"}]}}]},
    {"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}}]},
    {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "many"}},
    {"choices": [{"message": {"content": "x"}, "logprobs": {"content": [{"token": "x"}]}}]},
    {"error": {"message": "model overloaded"}},
    {"choices": [{"message": {"content": "x"}, "finish_reason": "error"}]},
])
def test_malformed_upstream_response_is_a_502(body: object) -> None:
    with pytest.raises(UpstreamError) as info:
        events_from_response(body)
    assert info.value.status == 502


def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None,
          **choice_extra: Any) -> dict[str, Any]:
    """An upstream chunk with one choice; `choice_extra` (logprobs) goes into the choice."""
    choices = [{"index": 0, "delta": delta, "finish_reason": finish, **choice_extra}]
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
            "choices": choices, "usage": usage}


def test_chunk_decoder_text_tools_and_usage() -> None:
    decoder = ChunkDecoder()
    feed = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let"}, logprobs={"content": [{"token": "Let", "logprob": -0.1}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "ls", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"d"'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                               "function": {"name": "pwd", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ':"."}'}}]}),
        chunk({}, "tool_calls"),
    ]
    events = [ev for c in feed for ev in decoder.feed(c)]
    assert decoder.finished
    assert events == [TextDelta("Let", logprob=-0.1, tokens=1), ToolCallStart(0, "call_1", "ls"),
                      ToolCallDelta(0, '{"d"'), ToolCallStart(1, "call_2", "pwd"), ToolCallDelta(1, "{}"),
                      ToolCallDelta(0, ':"."}')]
    usage_chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
                   "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 8, "total_tokens": 11}}
    assert decoder.feed(usage_chunk) == [Finish("tool_calls", Usage(3, 8), model="up-model")]
    assert decoder.end() == []
    assert assemble(events + [Finish("tool_calls")]).tool_calls[0].arguments == '{"d":"."}'


def test_chunk_decoder_finish_without_usage_comes_at_end() -> None:
    decoder = ChunkDecoder()
    assert decoder.feed(chunk({"content": "ok"})) == [TextDelta("ok")]
    assert decoder.feed(chunk({}, "stop")) == []
    assert decoder.end() == [Finish("stop", Usage(), model="up-model")]


def test_chunk_decoder_usage_in_the_finish_chunk() -> None:
    decoder = ChunkDecoder()
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    assert decoder.feed(chunk({"content": "x"}, "length", usage=usage)) == [
        TextDelta("x"), Finish("length", Usage(1, 1), model="up-model")]


def test_chunk_decoder_without_finish_reason_is_truncated() -> None:
    decoder = ChunkDecoder()
    decoder.feed(chunk({"content": "half an ans"}))
    with pytest.raises(UpstreamError, match="truncated stream"):
        decoder.end()


def test_chunk_decoder_tool_calls_without_index_and_late_name() -> None:
    decoder = ChunkDecoder()
    events: list[Event] = []
    # No "index" (some compatible servers): ids tell calls apart; arguments before a name wait for it.
    for c in [chunk({"tool_calls": [{"id": "a", "function": {"name": "ls", "arguments": "{"}}]}),
              chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
              chunk({"tool_calls": [{"id": "b", "function": {"name": "pwd", "arguments": "{}"}}]}),
              chunk({"tool_calls": [{"index": 2, "function": {"arguments": "[1]"}}]}),
              chunk({"tool_calls": [{"index": 2, "id": "c", "function": {"name": "cat"}}]}),
              chunk({}, "stop")]:
        events += decoder.feed(c)
    events += decoder.end()
    completion = assemble(events)
    assert completion.tool_calls == [ToolCall("a", "ls", "{}"), ToolCall("b", "pwd", "{}"),
                                     ToolCall("c", "cat", "[1]")]
    assert completion.finish_reason == "tool_calls"


@pytest.mark.parametrize("bad", [
    "text",
    {"error": {"message": "overloaded", "type": "server_error"}},
    {"choices": [{"delta": "x"}]},
    {"choices": [{"delta": {"content": 3}}]},
    {"choices": [{"delta": {"tool_calls": {"index": 0}}}]},
    {"choices": [{"delta": {"tool_calls": ["x"]}}]},
    {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": 1}}]}}]},
    {"choices": [], "usage": "lots"},
])
def test_chunk_decoder_malformed_chunk_is_a_502(bad: object) -> None:
    with pytest.raises(UpstreamError) as info:
        ChunkDecoder().feed(bad)
    assert info.value.status == 502


def test_reasoning_deltas_are_keepalives_not_text() -> None:
    from daari.protocol.events import KeepAlive
    from daari.protocol.openai_render import ChunkDecoder

    decoder = ChunkDecoder()
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "r1",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": None,
                                                "reasoning_content": "Let me think"}, "finish_reason": None}]}
    assert decoder.feed(chunk) == [KeepAlive()]
    chunk["choices"][0]["delta"] = {"content": "42"}
    assert [type(e).__name__ for e in decoder.feed(chunk)] == ["TextDelta"]
