"""OpenAI request parsing and validation, and the upstream body built from neutral requests."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from daari.errors import InvalidRequest
from daari.protocol.chat import ChatRequest, Message, Tool, ToolCall
from daari.protocol.openai_wire import DEFAULT_MODEL, TOOL_ERROR_PREFIX, parse_chat_request, to_upstream_body

USER = {"role": "user", "content": "hi"}
PNG = "data:image/png;base64,AA"


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [USER], **fields}


def calls(tool_calls: object) -> dict[str, Any]:
    return body(messages=[{"role": "assistant", "tool_calls": tool_calls}])


BAD_INPUTS: list[tuple[object, str, str]] = [
    ([], "body", "JSON object"),
    ("text", "body", "JSON object"),
    ({"model": "m"}, "messages", "non-empty list"),
    (body(messages=[]), "messages", "non-empty list"),
    (body(messages={"role": "user"}), "messages", "non-empty list"),
    (body(messages=["hi"]), "messages[0]", "must be an object"),
    (body(messages=[{"role": "robot", "content": "x"}]), "messages[0].role", "must be one of"),
    (body(messages=[{"content": "x"}]), "messages[0].role", "must be one of"),
    (body(messages=[{"role": "function", "name": "f", "content": "x"}]), "messages[0].role", "legacy"),
    (body(messages=[{"role": "user", "content": 5}]), "messages[0].content", "string, null, or a list"),
    (body(messages=[{"role": "user", "content": [5]}]), "messages[0].content[0]", "content part object"),
    (body(messages=[{"role": "user", "content": [{"type": "text"}]}]), "messages[0].content[0].text",
     "is required and must be a string"),
    (body(messages=[{"role": "user", "content": [{"input_audio": {}}]}]),
     "messages[0].content[0].type", "is required and must be a non-empty string"),
    (body(messages=[{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]),
     "messages[0].content[0].type", "not supported in a system message"),
    (body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]),
     "messages[0].content[0].image_url.url", "is required and must be an http(s) or data: URL"),
    (body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:xx"}}]}]),
     "messages[0].content[0].image_url.url", "data:<media type>;base64"),
    (body(messages=[{"role": "user", "content": "x", "name": 3}]), "messages[0].name", "must be a string"),
    (body(messages=[{"role": "tool", "content": "42"}]), "messages[0].tool_call_id", "required"),
    (body(messages=[{"role": "assistant", "tool_calls": {}}]), "messages[0].tool_calls", "must be a list"),
    (calls([{"id": "c1"}]), "messages[0].tool_calls[0].function", "is required and must be an object"),
    (calls([{"function": {"name": "f", "arguments": "{}"}}]),
     "messages[0].tool_calls[0].id", "non-empty string"),
    (calls([{"id": "c", "function": {"arguments": "{}"}}]),
     "messages[0].tool_calls[0].function.name", "non-empty string"),
    (calls([{"id": "c", "function": {"name": "f", "arguments": 3}}]),
     "messages[0].tool_calls[0].function.arguments", "JSON string"),
    (body(messages=[{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}]),
     "messages[0].function_call", "legacy"),
    (body(model=7), "model", "non-empty string"),
    (body(model=""), "model", "non-empty string"),
    (body(temperature=3), "temperature", "between 0 and 2"),
    (body(temperature="0.5"), "temperature", "between 0 and 2"),
    (body(temperature=True), "temperature", "between 0 and 2"),
    (body(stream="yes"), "stream", "boolean"),
    (body(max_tokens=0), "max_tokens", "integer >= 1"),
    (body(max_tokens=1.5), "max_tokens", "integer >= 1"),
    (body(max_completion_tokens=-1), "max_completion_tokens", "integer >= 1"),
    (body(top_p=1.5), "top_p", "between 0 and 1"),
    (body(n=0), "n", "integer >= 1"),
    (body(top_logprobs=30), "top_logprobs", "between 0 and 20"),
    (body(stop=[1]), "stop[0]", "must be a string, got 1"),  # OpenAI's own param for it
    (body(stop=1), "stop", "string or a list of strings"),
    (body(response_format="json"), "response_format", "must be an object"),
    (body(tool_choice="sometimes"), "tool_choice", "'none', 'auto', 'required'"),
    (body(stream_options=True), "stream_options", "must be an object"),
    (body(tools={"type": "function"}), "tools", "must be a list"),
    (body(tools=["f"]), "tools[0]", "must be an object"),
    (body(tools=[{"type": "retrieval"}]), "tools[0].type", "must be 'function'"),
    (body(tools=[{"type": "function"}]), "tools[0].function", "object with a name"),
    (body(tools=[{"type": "function", "function": {"name": ""}}]), "tools[0].function.name", "non-empty"),
    (body(tools=[{"type": "function", "function": {"name": "f", "description": 1}}]),
     "tools[0].function.description", "must be a string"),
    (body(tools=[{"type": "function", "function": {"name": "f", "parameters": "x"}}]),
     "tools[0].function.parameters", "JSON schema object"),
    (body(functions=[{"name": "f"}]), "functions", "legacy"),
]


@pytest.mark.parametrize(("payload", "param", "message"), BAD_INPUTS)
def test_bad_input_names_the_field(payload: object, param: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_chat_request(payload, {})
    assert info.value.param == param
    assert message in info.value.message
    assert info.value.status == 400


def test_minimal_request() -> None:
    request = parse_chat_request(body(), {})
    assert request.protocol == "openai"
    assert request.model == "gpt-4o"
    assert request.messages == [Message(role="user", content="hi")]
    assert request.stream is False and request.temperature is None
    assert request.sampling == {} and request.tools == [] and request.include_usage is False


def test_missing_model_defaults_to_daari() -> None:
    assert parse_chat_request({"messages": [USER]}, {}).model == DEFAULT_MODEL == "daari"


def test_nulls_mean_absent() -> None:
    request = parse_chat_request(body(temperature=None, max_tokens=None, stop=[], tools=None, stream=None,
                                      top_p=None, model=None, tool_choice=None), {})
    assert request.temperature is None and request.sampling == {} and request.tools == []
    assert request.model == DEFAULT_MODEL and request.stream is False


def test_developer_role_reads_as_system_and_parts_are_kept() -> None:
    request = parse_chat_request(body(messages=[
        {"role": "developer", "content": [{"type": "text", "text": "be brief"}]},
        {"role": "user", "content": [
            {"type": "text", "text": "what is this", "cache_control": {"type": "ephemeral"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        ]},
    ]), {})
    system, user = request.messages
    assert system.role == "system" and system.text() == "be brief"
    assert user.content == [
        {"type": "text", "text": "what is this"},
        {"type": "image", "media_type": "image/png", "data": "iVBOR"},
        {"type": "image", "url": "https://example.com/cat.jpg"},
    ]


def test_agent_history_with_tool_calls_and_results() -> None:
    request = parse_chat_request(body(messages=[
        USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"p":"a"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "ls", "arguments": {"dir": "."}}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "file body"}]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    ]), {})
    assistant, tool, refusal = request.messages[1:]
    assert assistant.content is None
    assert assistant.tool_calls == [ToolCall("call_1", "read_file", '{"p":"a"}'),
                                    ToolCall("call_2", "ls", '{"dir":"."}')]
    assert tool.role == "tool" and tool.tool_call_id == "call_1" and tool.text() == "file body"
    assert refusal.text() == "no"


def test_tools_parse_with_default_parameters() -> None:
    request = parse_chat_request(body(tools=[
        {"type": "function",
         "function": {"name": "ls", "description": "list", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "now"}},
    ]), {})
    assert request.tools == [Tool("ls", "list", {"type": "object"}),
                             Tool("now", None, {"type": "object", "properties": {}})]


def test_sampling_holds_only_what_the_client_set() -> None:
    request = parse_chat_request(body(
        temperature=0, top_p=0.5, stop="END", seed=7, n=1, tool_choice="auto", user="alice",
        response_format={"type": "json_object"}, logprobs=True, top_logprobs=2, metadata={"a": 1},
        parallel_tool_calls=False, presence_penalty=0.1, frequency_penalty=-0.1, logit_bias={"50256": -100},
        stream=True, stream_options={"include_usage": True}, some_vendor_field={"x": 1},
    ), {})
    assert request.temperature == 0.0
    assert request.sampling == {
        "top_p": 0.5, "stop": "END", "seed": 7, "n": 1, "tool_choice": "auto",
        "response_format": {"type": "json_object"}, "logprobs": True, "top_logprobs": 2,
        "parallel_tool_calls": False, "presence_penalty": 0.1, "frequency_penalty": -0.1,
        "logit_bias": {"50256": -100},
    }
    assert request.stream is True and request.include_usage is True
    assert request.raw["some_vendor_field"] == {"x": 1} and request.raw["user"] == "alice"


def test_max_completion_tokens_folds_into_max_tokens() -> None:
    assert parse_chat_request(body(max_completion_tokens=64), {}).max_tokens == 64
    assert parse_chat_request(body(max_tokens=32), {}).sampling == {"max_tokens": 32}
    # Both set: the newer name wins, as OpenAI documents max_tokens as its deprecated alias.
    assert parse_chat_request(body(max_tokens=32, max_completion_tokens=64), {}).max_tokens == 64


# --- to_upstream_body -------------------------------------------------------------------------------------

def test_upstream_body_round_trips_an_openai_agent_request() -> None:
    client_body = body(
        messages=[
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "look"},
                                         {"type": "image_url", "image_url": {"url": PNG}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        ],
        tools=[{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
        tool_choice="required", temperature=0.2, max_tokens=100, user="u",
    )
    out = to_upstream_body(parse_chat_request(client_body, {}), None, stream=False)
    assert out == client_body | {"stream": False}  # an OpenAI client's body passes through whole
    out = to_upstream_body(dataclasses.replace(parse_chat_request(client_body, {}), raw={}), None, stream=False)
    assert out == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "look"},
                                         {"type": "image_url", "image_url": {"url": PNG}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
            {"role": "tool", "content": "a.txt", "tool_call_id": "c1"},
        ],
        "temperature": 0.2,
        "tool_choice": "required",
        "max_tokens": 100,
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
        "stream": False,
    }


def test_upstream_stream_asks_for_usage_and_model_overrides() -> None:
    out = to_upstream_body(parse_chat_request(body(stream=True), {}), "llama3", stream=True)
    assert out["model"] == "llama3"
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}


def test_upstream_keeps_max_completion_tokens_name() -> None:
    out = to_upstream_body(parse_chat_request(body(max_completion_tokens=50), {}), None, stream=False)
    assert out["max_completion_tokens"] == 50 and "max_tokens" not in out


def test_upstream_drops_tool_only_params_without_tools() -> None:
    out = to_upstream_body(parse_chat_request(body(tool_choice="auto", parallel_tool_calls=True), {}), None,
                           stream=False)
    assert "tool_choice" not in out and "parallel_tool_calls" not in out and "tools" not in out


def test_upstream_body_from_an_anthropic_shaped_request() -> None:
    request = ChatRequest(
        protocol="anthropic",
        model="claude-sonnet",
        messages=[
            Message("system", [{"type": "text", "text": "You are Claude Code."},
                               {"type": "text", "text": "Be terse."}]),
            Message("user", [{"type": "text", "text": "see"},
                             {"type": "image", "media_type": "image/jpeg", "data": "Zm9v"}]),
            Message("assistant", [{"type": "text", "text": "Reading."}],
                    tool_calls=[ToolCall("toolu_1", "Read", '{"path":"x"}')]),
            Message("tool", [{"type": "text", "text": "no such file"}], tool_call_id="toolu_1",
                    is_error=True),
            Message("tool", "ok", tool_call_id="toolu_2"),
        ],
        temperature=1.0,
        tools=[Tool("Read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})],
        sampling={"max_tokens": 1024, "top_k": 40, "stop": ["\n\nHuman:"], "tool_choice": {"type": "any"}},
    )
    out = to_upstream_body(request, "gpt-4o-mini", stream=False)
    assert out["model"] == "gpt-4o-mini"
    assert out["messages"] == [
        {"role": "system", "content": "You are Claude Code.\nBe terse."},
        {"role": "user", "content": [{"type": "text", "text": "see"},
                                     {"type": "image_url",
                                      "image_url": {"url": "data:image/jpeg;base64,Zm9v"}}]},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "Read", "arguments": '{"path":"x"}'}}]},
        {"role": "tool", "content": TOOL_ERROR_PREFIX + "no such file", "tool_call_id": "toolu_1"},
        {"role": "tool", "content": "ok", "tool_call_id": "toolu_2"},
    ]
    assert "top_k" not in out
    assert out["max_tokens"] == 1024 and out["stop"] == ["\n\nHuman:"] and out["tool_choice"] == "required"
    assert out["tools"][0]["function"]["description"] == "Read a file"


@pytest.mark.parametrize(("choice", "wire"), [
    ({"type": "auto"}, "auto"),
    ({"type": "any"}, "required"),
    ({"type": "none"}, "none"),
    ({"type": "tool", "name": "Read"}, {"type": "function", "function": {"name": "Read"}}),
    ({"type": "function", "function": {"name": "Read"}}, {"type": "function", "function": {"name": "Read"}}),
])
def test_tool_choice_translation(choice: object, wire: object) -> None:
    request = ChatRequest(messages=[Message("user", "x")], model="m", tools=[Tool("Read", None, {})],
                          sampling={"tool_choice": choice})
    assert to_upstream_body(request, None, stream=False)["tool_choice"] == wire


def test_image_url_part_round_trips_http_url() -> None:
    image = {"type": "image", "url": "https://x/y.png"}
    request = ChatRequest(messages=[Message("user", [image])], model="m")
    assert to_upstream_body(request, None, False)["messages"][0]["content"] == [
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]


def test_n_above_one_is_refused_with_the_reason() -> None:
    from daari.errors import InvalidRequest
    from daari.protocol.openai_wire import parse_chat_request

    assert parse_chat_request({"messages": [{"role": "user", "content": "x"}], "n": 1}, {}).sampling["n"] == 1
    with pytest.raises(InvalidRequest) as info:
        parse_chat_request({"messages": [{"role": "user", "content": "x"}], "n": 2}, {})
    assert info.value.param == "n" and "one choice" in info.value.message
