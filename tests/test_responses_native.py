"""A Responses-speaking upstream (`wire_api: responses`): Responses clients pass through natively (custom tools,
reasoning items with encrypted_content, unknown fields), other clients are translated; L0 replays the
upstream's own response."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from daari.protocol.sse import SSEDecoder
from tests.fakes.responses_upstream import PATCH, FakeResponses
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
SHELL = {"type": "function", "name": "shell", "description": "Run a command", "strict": False,
         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}


@pytest.fixture
def fake() -> FakeResponses:
    return FakeResponses()


@pytest.fixture
def server_url(tmp_path: Path, fake: FakeResponses) -> Iterator[str]:
    with serve_app_in_thread(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", wire_api="responses")
        with daari_in_thread(make_config(tmp_path, tiers={"L3": tier})) as server:
            yield server.url


@pytest.fixture
def client(server_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server_url + "/v1", api_key="sk-test-not-a-real-key", max_retries=0)


def codex_body(**overrides: Any) -> dict[str, Any]:
    """A request shaped like Codex CLI's: stream, store false, encrypted reasoning, a freeform tool."""
    body = {"model": "tools", "instructions": "You are a coding agent.", "stream": True, "store": False,
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "add hello.txt"}]}],
            "tools": [APPLY_PATCH, SHELL], "tool_choice": "auto", "parallel_tool_calls": False,
            "reasoning": {"effort": "medium", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "session-1", "text": {"verbosity": "low"}}
    return {**body, **overrides}


def sse_events(reply: httpx.Response) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    events = [json.loads(e.data) for e in decoder.feed(reply.content)]
    assert not decoder.pending
    return events


def test_codex_request_passes_through_untouched(server_url: str, fake: FakeResponses) -> None:
    body = codex_body()
    reply = httpx.post(server_url + "/v1/responses", json=body, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    sent = fake.requests[-1]
    assert sent.path == "/v1/responses"
    assert sent.body == body  # every field as the client sent it: custom tool, include, prompt_cache_key
    events = sse_events(reply)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.custom_tool_call_input.delta" in kinds
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done[0]["type"] == "custom_tool_call" and done[0]["input"] == PATCH
    final = events[-1]
    assert final["type"] == "response.completed"
    response = final["response"]
    assert response["id"] == events[0]["response"]["id"] and response["id"].startswith("resp_")
    assert response["daari_meta"]["tier"] == "L3" and response["daari_meta"]["executor"] == "openai_responses"
    assert response["output"][0]["type"] == "custom_tool_call"
    assert response["usage"]["input_tokens_details"]["cached_tokens"] == 3  # the upstream's usage, unchanged
    assert "translated" not in response["daari_meta"]  # nothing was: the upstream got the request as sent


def test_custom_tool_round_trip_and_l0_replay_of_encrypted_reasoning(server_url: str, fake: FakeResponses) -> None:
    history = [{"type": "message", "role": "user", "content": "add hello.txt"},
               {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-opaque-1"},
               {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": PATCH},
               {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done: hello.txt"}]
    first = httpx.post(server_url + "/v1/responses", json=codex_body(input=history), timeout=30,
                       headers={"session_id": "s-1", "originator": "codex_cli_rs"})
    sent = fake.requests[-1].body
    assert sent["input"] == history  # the reasoning item and its encrypted content reach the upstream
    final = sse_events(first)[-1]["response"]
    assert "The tool said: Done: hello.txt" in final["output"][-1]["content"][0]["text"]
    # A repeat from another session (prompt_cache_key and session header differ) is an L0 hit that replays
    # the same items.
    again = httpx.post(server_url + "/v1/responses", json=codex_body(input=history, prompt_cache_key="other"),
                       timeout=30, headers={"session_id": "s-2", "originator": "codex_cli_rs"})
    replayed = sse_events(again)
    assert len(fake.requests) == 1
    assert replayed[-1]["response"]["daari_meta"]["cache_hit"] is True
    assert replayed[-1]["response"]["output"] == final["output"]
    assert [e["sequence_number"] for e in replayed] == list(range(len(replayed)))


def test_sdk_create_keeps_reasoning_items_with_encrypted_content(client: openai.OpenAI, fake: FakeResponses) -> None:
    response = client.responses.create(model="good", input="why is the sky blue?",
                                       include=["reasoning.encrypted_content"], store=False)
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message"]
    assert response.output[0].encrypted_content is not None
    assert "sky blue" in response.output_text
    assert response.model_extra["daari_meta"]["tier"] == "L3"
    # The next turn sends the reasoning item back; the upstream receives it as sent.
    follow = client.responses.create(model="good", store=False, include=["reasoning.encrypted_content"], input=[
        {"role": "user", "content": "why is the sky blue?"},
        *[item.model_dump(exclude_none=True) for item in response.output],
        {"role": "user", "content": "and at sunset?"}])
    assert fake.requests[-1].body["input"][1]["encrypted_content"] == response.output[0].encrypted_content
    assert "sunset" in follow.output_text


def test_sdk_stream_through_native_upstream(client: openai.OpenAI) -> None:
    with client.responses.stream(model="good", input="explain trio cancel scopes") as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output[0].type == "reasoning" and "cancel scopes" in final.output_text
    assert final.model_extra["daari_meta"]["executor"] == "openai_responses"


def test_previous_response_id_sends_the_whole_history_upstream(client: openai.OpenAI, fake: FakeResponses) -> None:
    first = client.responses.create(model="good", input="remember 42")
    client.responses.create(model="good", input="what did I ask you to remember?", previous_response_id=first.id)
    sent = fake.requests[-1].body
    assert "previous_response_id" not in sent  # daari's ids mean nothing upstream: the history goes instead
    assert [i.get("type", "message") for i in sent["input"]] == ["message", "reasoning", "message", "message"]
    assert sent["input"][2]["content"][0]["text"] == first.output_text


def test_failed_upstream_stream_is_response_failed(server_url: str, fake: FakeResponses) -> None:
    fake.script = ["failed"]
    reply = httpx.post(server_url + "/v1/responses", json={"model": "good", "input": "hi", "stream": True},
                       timeout=30)
    events = sse_events(reply)
    assert events[-1]["type"] == "response.failed"
    assert "model crashed" in events[-1]["response"]["error"]["message"]
    assert events[-1]["response"]["daari_meta"]["error"]


def test_upstream_400_keeps_its_status_and_message(client: openai.OpenAI, fake: FakeResponses) -> None:
    fake.script = ["error400"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="good", input="hi")
    assert "Invalid value for 'input'" in caught.value.message


def test_chat_client_is_translated_for_a_responses_upstream(server_url: str, fake: FakeResponses) -> None:
    chat = openai.OpenAI(base_url=server_url + "/v1", api_key="sk-test-not-a-real-key", max_retries=0)
    tool = {"type": "function", "function": {"name": SHELL["name"], "description": "Run a command",
                                             "parameters": SHELL["parameters"], "strict": True}}
    first = chat.chat.completions.create(model="tools", messages=[{"role": "user", "content": "list files"}],
                                         tools=[tool], max_tokens=50)  # type: ignore[list-item]
    sent = fake.requests[-1].body
    assert sent["tools"][0]["name"] == "shell" and sent["max_output_tokens"] == 50 and sent["store"] is False
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert first.choices[0].finish_reason == "tool_calls" and json.loads(call.function.arguments) == {  # type: ignore[union-attr]
        "command": "example"}
    stream = chat.chat.completions.create(model="tools", stream=True, tools=[tool], messages=[  # type: ignore[list-item]
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "a.txt b.txt"}])
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert "a.txt b.txt" in text
    assert fake.requests[-1].body["input"][-1] == {"type": "function_call_output", "call_id": call.id,
                                                   "output": "a.txt b.txt"}


def test_anthropic_client_is_translated_for_a_responses_upstream(server_url: str, fake: FakeResponses) -> None:
    import anthropic

    claude = anthropic.Anthropic(base_url=server_url, api_key="sk-ant-test-not-real", max_retries=0)
    message = claude.messages.create(model="good", max_tokens=64, system="Be brief.",
                                     messages=[{"role": "user", "content": "what is a monad?"}])
    sent = fake.requests[-1].body
    assert sent["input"][0] == {"type": "message", "role": "system", "content": "Be brief."}
    assert sent["max_output_tokens"] == 64
    assert message.content[-1].type == "text" and "monad" in message.content[-1].text  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"


def test_incomplete_native_response_keeps_its_status(client: openai.OpenAI) -> None:
    response = client.responses.create(model="length", input="long story")
    assert response.status == "incomplete" and response.model_extra["daari_meta"]["tier"] == "L3"


def test_forward_client_key_sends_the_clients_bearer_to_a_responses_tier(tmp_path: Path) -> None:
    fake = FakeResponses()
    with serve_app_in_thread(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", wire_api="responses", forward_client_key=True)
        with daari_in_thread(make_config(tmp_path, tiers={"L3": tier})) as server:
            ok = httpx.post(server.url + "/v1/responses", json={"model": "good", "input": "hi"},
                            headers={"authorization": "Bearer sk-client-own-key-123"}, timeout=30)
            assert ok.status_code == 200
            assert fake.requests[-1].headers["authorization"] == "Bearer sk-client-own-key-123"
            keyless = httpx.post(server.url + "/v1/responses", json={"model": "good", "input": "hello"}, timeout=30)
            assert keyless.status_code == 401 and len(fake.requests) == 1
            assert "sk-client" not in keyless.text
