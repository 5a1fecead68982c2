"""Anthropic Messages request parsing, validation, count_tokens, and building upstream bodies."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daari.errors import InvalidRequest
from daari.protocol import anthropic_wire
from daari.protocol.anthropic_wire import count_tokens, parse_messages_request, to_upstream_body
from daari.protocol.chat import ChatRequest, Message, Tool, ToolCall
from daari.protocol.tokens import estimate_request_tokens

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def claude_code_body() -> dict[str, Any]:
    """Shaped like a Claude Code turn: cached system blocks, thinking, many tools, tool results."""
    return {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 32000,
        "temperature": 1,
        "stream": True,
        "metadata": {"user_id": "user_abc_account_123_session_456"},
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
             "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Working directory: /repo", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [
            {"name": "Bash", "description": "Run a shell command",
             "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                              "required": ["command"]}},
            {"name": "Read", "description": "Read a file",
             "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        ],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>be brief</system-reminder>"},
                {"type": "text", "text": "What is in the repo?", "cache_control": {"type": "ephemeral"}},
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should look.", "signature": "sig-abc"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "toolu_02", "name": "Read", "input": {"file_path": "/repo/ü.png"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "README.md\nsrc"},
                {"type": "tool_result", "tool_use_id": "toolu_02", "is_error": True, "content": [
                    {"type": "text", "text": "partial read"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                ]},
                {"type": "text", "text": "Continue."},
            ]},
        ],
    }


CLAUDE_CODE_HEADERS = {
    "Anthropic-Beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    "anthropic-version": "2023-06-01",
    "x-api-key": "sk-ant-secret-123",
    "user-agent": "claude-cli/2.0.0",
    "x-stainless-lang": "js",
}


def test_parse_claude_code_body() -> None:
    body = claude_code_body()
    request = parse_messages_request(body, CLAUDE_CODE_HEADERS)
    assert request.protocol == "anthropic"
    assert request.model == "claude-sonnet-4-5-20250929"
    assert request.stream is True
    assert request.temperature == 1.0
    assert request.raw is body
    roles = [m.role for m in request.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    system, user, assistant, result_ok, result_err, follow_up = request.messages
    assert system.content == ("You are Claude Code, Anthropic's official CLI for Claude.\n"
                              "Working directory: /repo")
    assert user.content == "<system-reminder>be brief</system-reminder>\nWhat is in the repo?"
    # thinking blocks are accepted but ride only in raw
    assert assistant.content == "Let me look."
    assert assistant.tool_calls == [
        ToolCall("toolu_01", "Bash", '{"command":"ls"}'),
        ToolCall("toolu_02", "Read", '{"file_path":"/repo/ü.png"}'),
    ]
    assert (result_ok.tool_call_id, result_ok.content) == ("toolu_01", "README.md\nsrc")
    assert result_ok.is_error is False
    assert result_err.tool_call_id == "toolu_02" and result_err.is_error is True
    assert result_err.content == [{"type": "text", "text": "partial read"},
                                  {"type": "image", "media_type": "image/png", "data": PNG}]
    assert follow_up.content == "Continue."
    assert request.sampling == {"max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 31999}}
    assert [t.name for t in request.tools] == ["Bash", "Read", "web_search"]
    assert request.tools[0].parameters["required"] == ["command"]
    assert request.tools[2] == Tool(name="web_search", description=None, parameters={},
                                    extra={"type": "web_search_20250305", "max_uses": 5})
    assert request.passthrough_headers == {
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
        "anthropic-version": "2023-06-01",
        "x-api-key": "sk-ant-secret-123",
        "user-agent": "claude-cli/2.0.0",
    }


def test_client_credentials_never_show_in_a_repr() -> None:
    headers = {"x-api-key": "sk-ant-secret-123", "Authorization": "Bearer sk-ant-bearer-456"}
    request = parse_messages_request(claude_code_body(), headers)
    assert request.passthrough_headers["authorization"] == "Bearer sk-ant-bearer-456"
    text = repr(request) + str(request.passthrough_headers)
    assert "sk-ant-secret-123" not in text and "sk-ant-bearer-456" not in text


def test_string_content_and_defaults() -> None:
    request = parse_messages_request(
        {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, {})
    assert request.model == "daari"
    assert request.messages == [Message(role="user", content="hi")]
    assert request.stream is False and request.temperature is None
    assert request.sampling == {"max_tokens": 5}
    assert request.passthrough_headers == {}


def test_unknown_fields_and_blocks_are_accepted_and_kept() -> None:
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}}
    body = {
        "model": "m", "max_tokens": 5, "service_tier": "auto", "container": "c1", "mcp_servers": [],
        "context_management": {"edits": []}, "some_future_field": {"x": 1},
        "messages": [{"role": "user", "content": [document, {"type": "text", "text": "summarize"}]}],
    }
    request = parse_messages_request(body, {"x-unknown-header": "1"})
    assert request.messages[0].content == [document, {"type": "text", "text": "summarize"}]
    assert request.raw["some_future_field"] == {"x": 1}


def test_url_image_and_stop_sequences_and_sampling() -> None:
    body = {
        "model": "m", "max_tokens": 50, "stop_sequences": ["END", "\n\n"], "top_p": 0.9, "top_k": 40,
        "temperature": 0,
        "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
            {"type": "text", "text": "what is this?"},
        ]}],
    }
    request = parse_messages_request(body, {})
    assert request.messages[0].content == [{"type": "image", "url": "https://example.com/cat.png"},
                                           {"type": "text", "text": "what is this?"}]
    assert request.sampling == {"max_tokens": 50, "stop": ["END", "\n\n"], "top_p": 0.9, "top_k": 40}
    assert request.stop == ["END", "\n\n"]
    assert request.temperature == 0.0


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, {"tool_choice": "auto"}),
    ({"type": "any"}, {"tool_choice": "required"}),
    ({"type": "none"}, {"tool_choice": "none"}),
    ({"type": "tool", "name": "Bash"}, {"tool_choice": {"name": "Bash"}}),
    ({"type": "auto", "disable_parallel_tool_use": True},
     {"tool_choice": "auto", "parallel_tool_calls": False}),
])
def test_tool_choice_to_neutral(choice: dict[str, Any], expected: dict[str, Any]) -> None:
    body = {"model": "m", "max_tokens": 5, "tool_choice": choice,
            "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "x"}]}
    sampling = parse_messages_request(body, {}).sampling
    assert {k: v for k, v in sampling.items() if k != "max_tokens"} == expected


def _base() -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def _with(path: str, value: Any) -> dict[str, Any]:
    body = _base()
    node: Any = body
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is _DELETE:
        del node[leaf]
    elif isinstance(node, list):
        node[int(leaf)] = value
    else:
        node[leaf] = value
    return body


_DELETE = object()


@pytest.mark.parametrize(("body", "param"), [
    (_with("max_tokens", _DELETE), "max_tokens"),
    (_with("max_tokens", 0), "max_tokens"),
    (_with("max_tokens", "100"), "max_tokens"),
    (_with("max_tokens", True), "max_tokens"),
    (_with("model", 7), "model"),
    (_with("messages", _DELETE), "messages"),
    (_with("messages", []), "messages"),
    (_with("messages", "hi"), "messages"),
    (_with("messages.0", "hi"), "messages.0"),
    (_with("messages.0.role", 7), "messages.0.role"),
    (_with("messages.0.role", _DELETE), "messages.0.role"),
    (_with("messages.0.content", 5), "messages.0.content"),
    (_with("messages.0.content", None), "messages.0.content"),
    (_with("messages.0.content", ["text"]), "messages.0.content.0"),
    (_with("messages.0.content", [{"text": "no type"}]), "messages.0.content.0.type"),
    (_with("messages.0.content", [{"type": "text", "text": 3}]), "messages.0.content.0.text"),
    (_with("messages.0.content", [{"type": "image", "source": {"type": "base64"}}]),
     "messages.0.content.0.source.media_type"),
    (_with("messages.0.content", [{"type": "image"}]), "messages.0.content.0.source"),
    (_with("messages.0.content", [{"type": "tool_result"}]), "messages.0.content.0.tool_use_id"),
    (_with("messages.0.content", [{"type": "tool_result", "tool_use_id": "t", "content": 3}]),
     "messages.0.content.0.content"),
    (_with("messages.0.content", [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]),
     "messages.0.content.0.is_error"),
    (_with("messages.0.content", [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]),
     "messages.0.content.0"),
    (_with("system", 5), "system"),
    (_with("system", [{"type": "text"}]), "system.0.text"),
    (_with("temperature", 1.5), "temperature"),
    (_with("temperature", "hot"), "temperature"),
    (_with("top_p", 2), "top_p"),
    (_with("top_k", -1), "top_k"),
    (_with("stream", "yes"), "stream"),
    (_with("stop_sequences", "END"), "stop_sequences"),
    (_with("tools", {"name": "x"}), "tools"),
    (_with("tools", [{"description": "no name"}]), "tools.0.name"),
    (_with("tools", [{"name": "x"}]), "tools.0.input_schema"),
    (_with("tool_choice", "auto"), "tool_choice"),
    (_with("tool_choice", {"type": "sometimes"}), "tool_choice.type"),
    (_with("tool_choice", {"type": "tool"}), "tool_choice.name"),
    (_with("thinking", "on"), "thinking"),
])
def test_invalid_requests_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_messages_request(body, {})
    assert info.value.param == param
    assert info.value.status == 400
    assert param.split(".")[0] in info.value.message


def test_tool_use_in_assistant_history_with_bad_input() -> None:
    body = _base()
    body["messages"] = [{"role": "user", "content": "x"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": "ls"}]}]
    with pytest.raises(InvalidRequest) as info:
        parse_messages_request(body, {})
    assert info.value.param == "messages.1.content.0.input"


@pytest.mark.parametrize("body", [None, [], "text", 3])
def test_body_must_be_an_object(body: object) -> None:
    with pytest.raises(InvalidRequest, match="JSON object"):
        parse_messages_request(body, {})


def test_count_tokens_needs_no_max_tokens() -> None:
    body = claude_code_body()
    del body["max_tokens"]
    result = count_tokens(body, {})
    assert result == {"input_tokens": estimate_request_tokens(parse_messages_request(claude_code_body(), {}))}
    assert result["input_tokens"] > 20
    with pytest.raises(InvalidRequest):
        count_tokens({"messages": []}, {})


def test_count_tokens_grows_with_the_prompt() -> None:
    short = count_tokens({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, {})
    longer = count_tokens({"model": "m", "messages": [{"role": "user", "content": "hi " * 400}]}, {})
    assert longer["input_tokens"] > short["input_tokens"] + 200


# ---------------------------------------------------------------- to_upstream_body


def test_anthropic_request_passes_through_raw_with_model_and_stream_replaced() -> None:
    body = claude_code_body()
    original = copy.deepcopy(body)
    request = parse_messages_request(body, {})
    upstream = to_upstream_body(request, "claude-opus-4-1", stream=False)
    assert upstream == {**original, "model": "claude-opus-4-1", "stream": False}
    assert body == original  # the client's body is not mutated
    assert to_upstream_body(request, None, True)["model"] == "claude-sonnet-4-5-20250929"


def openai_shaped_request() -> ChatRequest:
    return ChatRequest(
        model="gpt-x",
        protocol="openai",
        temperature=1.6,
        messages=[
            Message(role="system", content="Be terse."),
            Message(role="user", content=[{"type": "text", "text": "look"},
                                          {"type": "image", "media_type": "image/png", "data": PNG}]),
            Message(role="assistant", content=None, tool_calls=[
                ToolCall("call_1", "get_weather", '{"city":"Paris"}'),
                ToolCall("call_2", "list_files", ""),
            ]),
            Message(role="tool", tool_call_id="call_1", content="18C"),
            Message(role="tool", tool_call_id="call_2", content="denied", is_error=True),
            Message(role="user", content="and?"),
            Message(role="user", content="quick"),
        ],
        tools=[Tool("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
               Tool("list_files", None, {})],
        sampling={"stop": "DONE", "tool_choice": "required", "top_p": 0.5, "seed": 3,
                  "parallel_tool_calls": False},
    )


def test_neutral_request_to_anthropic_body() -> None:
    body = to_upstream_body(openai_shaped_request(), None, stream=True)
    assert body["model"] == "gpt-x"
    assert body["max_tokens"] == 4096
    assert body["system"] == "Be terse."
    assert body["temperature"] == 1.0  # Anthropic's range ends at 1
    assert body["stop_sequences"] == ["DONE"]
    assert body["top_p"] == 0.5
    assert "seed" not in body
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert body["stream"] is True
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "list_files", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "call_2", "name": "list_files", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "denied", "is_error": True},
            {"type": "text", "text": "and?"},
            {"type": "text", "text": "quick"}]},
    ]
    json.dumps(body)  # serializable as is


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", {"type": "auto"}),
    ("none", {"type": "none"}),
    ("required", {"type": "any"}),
    ({"name": "f"}, {"type": "tool", "name": "f"}),
    ({"type": "function", "function": {"name": "f"}}, {"type": "tool", "name": "f"}),
])
def test_tool_choice_to_anthropic(choice: Any, expected: dict[str, Any]) -> None:
    request = ChatRequest(messages=[Message(role="user", content="x")], model="m",
                          tools=[Tool("f", None, {"type": "object"})],
                          sampling={"tool_choice": choice, "max_tokens": 9})
    body = to_upstream_body(request, "m2", stream=False)
    assert body["tool_choice"] == expected
    assert body["max_tokens"] == 9
    assert body["model"] == "m2"


def test_unparseable_tool_arguments_become_an_empty_input() -> None:
    request = ChatRequest(model="m", messages=[
        Message(role="user", content="x"),
        Message(role="assistant", content="ok", tool_calls=[ToolCall("c", "f", '{"a": ')]),
    ])
    body = to_upstream_body(request, None, stream=False)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "ok"},
                                              {"type": "tool_use", "id": "c", "name": "f", "input": {}}]


def test_anthropic_request_parsed_then_rebuilt_without_raw_keeps_its_meaning() -> None:
    request = parse_messages_request(claude_code_body(), {})
    request.raw = {}
    body = to_upstream_body(request, None, stream=False)
    assert body["system"].startswith("You are Claude Code")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 31999}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    results = body["messages"][2]["content"]
    assert results[1]["is_error"] is True
    assert results[1]["content"][1]["source"]["data"] == PNG
    assert results[2] == {"type": "text", "text": "Continue."}


def test_json_null_means_absent() -> None:
    body = {"model": None, "max_tokens": 5, "stream": None, "system": None, "temperature": None,
            "top_p": None, "top_k": None, "stop_sequences": None, "tools": None, "tool_choice": None,
            "thinking": None, "metadata": None, "messages": [{"role": "user", "content": "hi"}]}
    request = parse_messages_request(body, {})
    assert (request.model, request.stream, request.temperature, request.tools) == ("daari", False, None, [])
    assert request.sampling == {"max_tokens": 5}
    assert [m.role for m in request.messages] == ["user"]


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                     max_leaves=20)


@given(_JSON)
def test_a_tool_calls_arguments_are_encoded_as_json_dumps_encodes_them(value: object) -> None:
    """The shared encoder gives the bytes json.dumps gave (they are part of the L0 key: a change would miss)."""
    assert anthropic_wire.compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
