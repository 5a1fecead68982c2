"""Responses requests and answers as pure functions: parsing into the neutral model, what only a Responses
upstream can serve, the translated upstream body, decoding an upstream's events, and the cache key."""

from __future__ import annotations

from typing import Any

import pytest

from daari.cache.l0_key import l0_key
from daari.errors import InvalidRequest, UpstreamError, UpstreamRateLimited
from daari.protocol.chat import ChatRequest, Message, Tool, ToolCall
from daari.protocol.events import Finish, KeepAlive, TextDelta, ToolCallDelta, ToolCallStart, assemble
from daari.protocol.openai_wire import to_upstream_body as openai_upstream_body
from daari.protocol.responses_decode import ResponsesEventDecoder, events_from_response
from daari.protocol.responses_tools import CallShape, call_shapes
from daari.protocol.responses_wire import (
    hosted_tools,
    lossy_translations,
    native_only_reason,
    parse_responses_request,
    to_responses_body,
)

WEATHER = {"type": "function", "name": "get_weather", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def parse(**body: Any) -> ChatRequest:
    return parse_responses_request({"model": "m", **body}, {})


def test_string_input_and_instructions() -> None:
    request = parse(input="hi", instructions="Be brief.")
    assert [(m.role, m.content) for m in request.messages] == [("system", "Be brief."), ("user", "hi")]
    assert request.protocol == "responses" and not request.stream


def test_items_fold_into_neutral_messages() -> None:
    request = parse(input=[
        {"role": "developer", "content": "rules"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"},
                                                         {"type": "input_image", "image_url": "https://x/y.png"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{\"city\":\"Rome\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "rain"}]},
    ], tools=[WEATHER])
    roles = [m.role for m in request.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool"]
    assert request.messages[1].content == [{"type": "text", "text": "weather?"},
                                           {"type": "image", "url": "https://x/y.png"}]
    assert request.messages[2].tool_calls == [ToolCall("c1", "get_weather", "{\"city\":\"Oslo\"}"),
                                              ToolCall("c2", "get_weather", "{\"city\":\"Rome\"}")]
    assert request.messages[3].tool_call_id == "c1" and request.messages[4].text() == "rain"
    assert request.tools == [Tool("get_weather", None, WEATHER["parameters"], {"strict": True})]
    assert native_only_reason(request) is None  # a reasoning item may be left out for another provider
    assert request.extra["input_items"][0]["at"] == 2  # but it is in the key, where it stood


def test_sampling_translates_to_neutral_names() -> None:
    request = parse(input="x", max_output_tokens=64, top_p=0.5, tool_choice={"type": "function", "name": "f"},
                    parallel_tool_calls=False, reasoning={"effort": "high"},
                    text={"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"},
                                     "strict": True}, "verbosity": "low"})
    assert request.sampling == {
        "top_p": 0.5, "max_tokens": 64, "tool_choice": {"name": "f"}, "parallel_tool_calls": False,
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"},
                                                                   "strict": True}},
        "verbosity": "low", "reasoning_effort": "high"}


@pytest.mark.parametrize(("body", "param"), [
    ({"input": 3}, "input"),
    ({"input": []}, "input"),
    ({"input": [{"type": "message", "role": "robot", "content": "x"}]}, "input[0].role"),
    ({"input": [{"type": "function_call", "name": "f"}]}, "input[0].call_id"),
    ({"input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "temperature": 3}, "temperature"),
    ({"input": "x", "conversation": "conv_1"}, "conversation"),
    ({"input": "x", "tool_choice": 5}, "tool_choice"),
])
def test_bad_requests_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse(**body)
    assert caught.value.param == param


@pytest.mark.parametrize(("body", "offered"), [
    ({"tools": [{"type": "mcp", "server_label": "docs"}]}, ["mcp:docs"]),
    ({"tools": [{"type": "web_search"}, WEATHER]}, ["web_search"]),
    ({"input": [{"type": "additional_tools", "role": "developer", "tools": [{"type": "image_generation"}]},
                {"role": "user", "content": "x"}]}, ["image_generation"]),
])
def test_hosted_tools_are_an_offer_not_a_native_only_reason(body: dict[str, Any], offered: list[str]) -> None:
    request = parse(**{"input": "x", **body})
    assert hosted_tools(request) == offered
    assert native_only_reason(request) is None
    assert all(t.extra.get("type") in (None, "function", "custom") for t in request.tools)


@pytest.mark.parametrize(("body", "reason"), [
    ({"prompt": {"id": "pmpt_1", "version": "2"}}, "a stored prompt template ('prompt'), which lives on the provider"),
    ({"tool_choice": {"type": "web_search"}}, "tool_choice type 'web_search'"),
    ({"input": [{"role": "user", "content": "x"}, {"type": "item_reference", "id": "msg_1"}]},
     "input item type 'item_reference'"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f1"}]}]},
     "content part type 'input_file'"),
])
def test_what_only_a_responses_upstream_can_serve(body: dict[str, Any], reason: str) -> None:
    request = parse(**{"input": "x", **body})
    assert native_only_reason(request) == reason


def test_cache_key_ignores_non_answer_fields_and_keys_the_rest() -> None:
    base = {"input": "hi", "tools": [WEATHER]}
    key = l0_key(parse(**base)).digest
    same = parse(**base, prompt_cache_key="s1", store=False, metadata={"a": "b"}, client_metadata={"x": 1},
                 stream=True, user="u")
    assert l0_key(same).digest == key
    for changed in ({"include": ["reasoning.encrypted_content"]}, {"reasoning": {"effort": "low"}},
                    {"truncation": "auto"}, {"tools": [{**WEATHER, "strict": False}]},
                    {"input": [{"role": "user", "content": "hi"},
                               {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "e"}]}):
        assert l0_key(parse(**{**base, **changed})).digest != key, changed


def test_responses_client_body_passes_through_whole() -> None:
    body = {"model": "m", "input": "x", "tools": [{"type": "custom", "name": "apply_patch"}], "future": 1,
            "previous_response_id": "resp_1"}
    request = parse_responses_request(body, {})
    sent = to_responses_body(request, "upstream-model", True)
    assert sent == {"model": "upstream-model", "input": "x", "tools": body["tools"], "future": 1, "stream": True}


def test_neutral_request_translates_to_responses_items() -> None:
    request = ChatRequest(
        messages=[Message("system", "rules"), Message("user", "weather?"),
                  Message("assistant", "checking", tool_calls=[ToolCall("c1", "get_weather", "{}")]),
                  Message("tool", "sunny", tool_call_id="c1")],
        model="m", tools=[Tool("get_weather", "w", {"type": "object"}, {"strict": True})],
        sampling={"max_tokens": 9, "tool_choice": {"name": "get_weather"}, "stop": ["x"],
                  "response_format": {"type": "json_object"}, "reasoning_effort": "low"})
    body = to_responses_body(request, None, False)
    assert body["input"] == [
        {"type": "message", "role": "system", "content": "rules"},
        {"type": "message", "role": "user", "content": "weather?"},
        {"type": "message", "role": "assistant", "content": "checking"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]
    assert body["tools"] == [{"type": "function", "name": "get_weather", "description": "w",
                              "parameters": {"type": "object"}, "strict": True}]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert body["max_output_tokens"] == 9 and body["text"] == {"format": {"type": "json_object"}}
    assert body["reasoning"] == {"effort": "low"} and body["store"] is False and "stop" not in body


def test_decoder_turns_a_stream_into_neutral_events() -> None:
    decoder = ResponsesEventDecoder()
    feed = [
        ("response.created", {"response": {"id": "r"}}),
        ("response.reasoning_summary_text.delta", {"delta": "hmm"}),
        ("response.output_text.delta", {"output_index": 1, "delta": "Hi "}),
        ("response.output_item.added", {"output_index": 2, "item": {"type": "function_call", "call_id": "c1",
                                                                     "name": "f", "arguments": ""}}),
        ("response.function_call_arguments.delta", {"output_index": 2, "delta": "{\"a\":"}),
        ("response.function_call_arguments.delta", {"output_index": 2, "delta": "1}"}),
        # A call whose arguments only arrive whole, in the done item.
        ("response.output_item.added", {"output_index": 3, "item": {"type": "function_call", "call_id": "c2",
                                                                     "name": "g"}}),
        ("response.output_item.done", {"output_index": 3, "item": {"type": "function_call", "call_id": "c2",
                                                                    "name": "g", "arguments": "{}"}}),
        ("response.completed", {"response": {"status": "completed", "model": "up",
                                             "usage": {"input_tokens": 5, "output_tokens": 2}}}),
    ]
    events = [e for name, data in feed for e in decoder.feed(name, data)]
    assert isinstance(events[0], KeepAlive) and events[1] == TextDelta("Hi ")
    assert ToolCallStart(2, "c1", "f") in events and ToolCallDelta(3, "{}") in events
    completion = assemble(events)
    assert completion.text == "Hi " and completion.finish_reason == "tool_calls"
    assert [(c.id, c.arguments) for c in completion.tool_calls] == [("c1", "{\"a\":1}"), ("c2", "{}")]
    assert completion.usage.prompt_tokens == 5 and completion.model == "up" and decoder.finished


def test_decoder_raises_the_upstreams_failures() -> None:
    with pytest.raises(UpstreamError, match="model crashed"):
        ResponsesEventDecoder().feed("response.failed", {"response": {"error": {"message": "model crashed"}}})
    with pytest.raises(UpstreamRateLimited):
        ResponsesEventDecoder().feed("error", {"code": "rate_limit_exceeded", "message": "slow down"})


def test_whole_response_decodes_and_incomplete_is_length() -> None:
    events = events_from_response({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                                   "output": [{"type": "reasoning", "summary": []},
                                              {"type": "message", "content": [{"type": "output_text",
                                                                               "text": "partial"}]}]})
    assert events == [TextDelta("partial"), Finish(reason="length")]
    with pytest.raises(UpstreamError, match="malformed"):
        events_from_response({"status": "completed", "output": "nope"})


def test_freeform_tool_and_its_calls_become_a_one_string_function() -> None:
    tool = {"type": "custom", "name": "apply_patch", "description": "Patch files",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}}
    request = parse(tools=[tool], input=[
        {"role": "user", "content": "fix it"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"}])
    assert native_only_reason(request) is None
    assert request.tools[0].parameters["required"] == ["input"]
    assert request.tools[0].description == "Patch files\n\nThe input must follow this lark grammar:\nstart: x"
    assert request.tools[0].extra == {"type": "custom", "format": tool["format"]}
    assert request.messages[1].tool_calls == [ToolCall("c1", "apply_patch", '{"input": "*** Begin Patch\\n"}')]
    assert request.messages[2].role == "tool" and request.messages[2].text() == "Done"


def test_reasoning_effort_and_verbosity_reach_a_translated_upstream() -> None:
    request = parse(input="x", reasoning={"effort": "low"}, text={"verbosity": "high"})
    assert request.extra["reasoning_effort"] == "low"  # where the Anthropic translation reads it
    chat_body = openai_upstream_body(request, None, False)
    assert chat_body["reasoning_effort"] == "low" and chat_body["verbosity"] == "high"


def test_namespaced_tools_flatten_and_their_calls_follow() -> None:
    namespace = {"type": "namespace", "name": "multi_agent", "description": "Agents",
                 "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object"}},
                           {"type": "custom", "name": "note"}]}
    request = parse(tools=[namespace], input=[
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "namespace": "multi_agent", "name": "spawn", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "spawned"}])
    assert [t.name for t in request.tools] == ["multi_agent__spawn", "multi_agent__note"]
    assert native_only_reason(request) is None
    assert request.messages[1].tool_calls[0].name == "multi_agent__spawn"
    assert call_shapes(request) == {"multi_agent__spawn": CallShape("function", "spawn", "multi_agent"),
                                    "multi_agent__note": CallShape("custom", "note", "multi_agent")}
    with pytest.raises(InvalidRequest) as caught:
        parse(input="x", tools=[{"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]}])
    assert caught.value.param == "tools[0].tools[0].type"


def test_lossy_translations_are_named() -> None:
    request = parse(tools=[{"type": "custom", "name": "apply_patch"}, WEATHER], input=[
        {"role": "user", "content": "x"}, {"type": "reasoning", "summary": [], "encrypted_content": "e"}])
    assert lossy_translations(request) == [
        "custom tool 'apply_patch': a function with one string argument; its grammar is not enforced",
        "reasoning items: left out (another provider's model cannot read them)"]
    assert lossy_translations(parse(input="plain", tools=[WEATHER])) == []
