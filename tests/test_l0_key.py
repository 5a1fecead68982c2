"""L0Key: what is in the key and what is not."""

from __future__ import annotations

from daari.cache.l0_key import l0_key
from daari.protocol.chat import ChatRequest, Message, Tool, ToolCall


def req(**kw: object) -> ChatRequest:
    base: dict[str, object] = {"messages": [Message(role="user", content="hello")], "model": "m"}
    base.update(kw)
    return ChatRequest(**base)  # type: ignore[arg-type]


def key(**kw: object) -> str:
    return l0_key(req(**kw)).digest


def test_same_request_same_key_and_whitespace_folds() -> None:
    assert key() == key()
    assert key(messages=[Message(role="user", content="hello  \n")]) == key()


def test_stream_and_protocol_do_not_change_the_key() -> None:
    assert key(stream=True) == key()
    assert key(protocol="anthropic") == key()
    assert key(include_usage=True) == key()


def test_missing_temperature_is_not_zero() -> None:
    assert key(temperature=None) != key(temperature=0.0)
    assert key(temperature=0.0) != key(temperature=0.7)


def test_model_tools_sampling_and_override_change_the_key() -> None:
    tool = Tool("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})
    other = Tool("get_weather", "Weather", {"type": "object", "properties": {"town": {"type": "string"}}})
    assert key(model="other") != key()
    assert key(tools=[tool]) != key()
    assert key(tools=[tool]) != key(tools=[other])
    for sampling in ({"max_tokens": 10}, {"top_p": 0.5}, {"stop": ["x"]}, {"seed": 1}, {"n": 2},
                     {"tool_choice": "required"}, {"response_format": {"type": "json_object"}},
                     {"presence_penalty": 0.1}, {"frequency_penalty": 0.1}, {"logit_bias": {"1": 2}}):
        assert key(sampling=sampling) != key(), sampling
    assert l0_key(req(), "L3").digest != l0_key(req()).digest


def test_changed_last_tool_result_is_a_different_key() -> None:
    def agent(result: str) -> ChatRequest:
        return req(messages=[
            Message(role="user", content="what is in the dir?"),
            Message(role="assistant", tool_calls=[ToolCall("call_1", "ls", '{"path": "."}')]),
            Message(role="tool", content=result, tool_call_id="call_1"),
        ])

    assert l0_key(agent("a.py b.py")).digest == l0_key(agent("a.py b.py")).digest
    assert l0_key(agent("a.py b.py")).digest != l0_key(agent("a.py b.py c.py")).digest
    assert l0_key(agent("a.py b.py")).digest != l0_key(agent("a.py b.py ")).digest
