"""The declared wire schemas (daari/protocol/schema.py and the *_schema modules): errors in each protocol's words
naming the field, open lists (known shapes checked, other types carried as sent, a list mixing both), and
hostile values (deep, huge) that must give a short 400, never a 500."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from daari.errors import InvalidRequest
from daari.protocol.anthropic_wire import parse_messages_request
from daari.protocol.chat import ChatRequest
from daari.protocol.openai_wire import parse_chat_request
from daari.protocol.responses_wire import parse_responses_request

Parse = Callable[[object, dict[str, str]], ChatRequest]


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}


def messages(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **fields}


def responses(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hi", **fields}


def refusal(parse: Parse, body: object) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse(body, {})
    assert caught.value.status == 400
    return caught.value


@pytest.mark.parametrize(("parse", "body", "param", "message"), [
    (parse_chat_request, chat(temperature=3), "temperature", "'temperature' must be a number between 0 and 2, got 3"),
    (parse_chat_request, chat(messages=[{"role": "user", "content": [{"type": "text", "text": 1}]}]),
     "messages[0].content[0].text", "'messages[0].content[0].text' must be a string, got 1"),
    (parse_chat_request, chat(tool_choice={"type": "function"}), "tool_choice.function",
     "'tool_choice.function' is required and must be an object"),
    (parse_messages_request, messages(temperature=2), "temperature",
     "temperature: Input should be less than or equal to 1"),
    (parse_messages_request, messages(tool_choice={"type": "sometimes"}), "tool_choice.type",
     "tool_choice.type: Input should be 'auto', 'any', 'none' or 'tool'"),
    (parse_messages_request, messages(messages=[{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": ""}]}]), "messages.0.content.0.name",
     "messages.0.content.0.name: String should have at least 1 character"),
    (parse_responses_request, responses(input=[{"type": "message", "role": "robot", "content": "x"}]),
     "input[0].role", "'input[0].role' must be one of system, developer, user, assistant, got 'robot'"),
    (parse_responses_request, responses(tools=[{"name": "f"}]), "tools[0].type",
     "'tools[0].type' is required and must be a string ('function', 'custom', 'web_search'...)"),
])
def test_errors_name_the_field_in_the_protocols_words(parse: Parse, body: dict[str, Any], param: str,
                                                      message: str) -> None:
    error = refusal(parse, body)
    assert (error.param, error.message) == (param, message)


def test_an_open_list_mixing_known_and_unknown_types() -> None:
    future = {"type": "block_from_2031", "x": [1, {"y": 2}]}
    request = parse_messages_request(messages(messages=[{"role": "user", "content": [
        {"type": "text", "text": "a"}, future, {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}]), {})
    assert request.messages[0].content == [{"type": "text", "text": "a"}, future,
                                           {"type": "image", "url": "https://x/y.png"}]
    assert request.shapes.unknown == ("block:block_from_2031",)
    # A bad known block after an unknown one is still named (the list is then read element by element).
    error = refusal(parse_messages_request, messages(messages=[{"role": "user", "content": [
        future, {"type": "text", "text": 5}]}]))
    assert error.param == "messages.0.content.1.text"


def test_unknown_parts_and_items_are_carried_as_sent() -> None:
    part = {"type": "input_hologram", "data": {"frames": [1, 2]}}
    request = parse_chat_request(chat(messages=[{"role": "user", "content": ["plain", part]}]), {})
    assert request.messages[0].content == [{"type": "text", "text": "plain"}, part]
    assert request.messages[0].content[1] is not part  # a copy: the body as sent stays the client's
    item = {"type": "item_from_2031", "payload": "p"}
    parsed = parse_responses_request(responses(input=[{"role": "user", "content": "x"}, item]), {})
    assert parsed.shapes.unknown == ("input_item:item_from_2031",) and len(parsed.extra["input_items"]) == 1


def _deep(levels: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(levels):
        node.append([])
        node = node[0]
    return root


@pytest.mark.parametrize(("parse", "body"), [
    (parse_chat_request, chat(temperature=_deep(3000))),
    (parse_chat_request, chat(model="x" * 1_000_000, temperature="hot")),
    (parse_messages_request, messages(top_k=_deep(3000))),
    (parse_responses_request, responses(temperature=_deep(3000))),
    (parse_responses_request, responses(max_output_tokens="9" * 1_000_000)),
])
def test_hostile_values_get_a_short_400(parse: Parse, body: dict[str, Any]) -> None:
    error = refusal(parse, body)  # the value is quoted a few levels deep and cut short: never a RecursionError
    assert len(error.message) < 200


def test_deeply_nested_values_daari_does_not_read_are_not_walked() -> None:
    schema: dict[str, Any] = {"type": "object"}
    node = schema
    for _ in range(5000):
        node["properties"] = {"a": {"type": "object"}}
        node = node["properties"]["a"]
    request = parse_messages_request(messages(tools=[{"name": "t", "input_schema": schema}]), {})
    assert request.tools[0].parameters is schema


@pytest.mark.parametrize(("parse", "body", "param"), [
    (parse_chat_request, chat(messages=[{"role": [], "content": "x"}]), "messages[0].role"),
    (parse_messages_request, messages(messages=[{"role": {}, "content": "x"}]), "messages.0.role"),
    (parse_responses_request, responses(input=[{"type": "message", "role": [], "content": "x"}]), "input[0].role"),
])
def test_a_role_of_the_wrong_type_is_a_400(parse: Parse, body: dict[str, Any], param: str) -> None:
    assert refusal(parse, body).param == param  # the hand-written checks raised TypeError on a list: a 500
