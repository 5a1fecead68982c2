"""POST /v1/responses end to end with the official `openai` SDK: daari in front of a chat-completions upstream
(translated through the neutral model), create and stream, a function-call round trip, previous_response_id,
stored responses, L0 hits and errors in OpenAI's shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI()


@pytest.fixture
def server_url(tmp_path: Path, fake: FakeOpenAI) -> Iterator[str]:
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            yield server.url


@pytest.fixture
def client(server_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server_url + "/v1", api_key="sk-test-not-a-real-key", max_retries=0)


def test_create_answers_and_a_repeat_is_an_l0_hit(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    first = client.responses.with_raw_response.create(model="good", input="what is a monad?",
                                                      instructions="Be brief.")
    response = first.parse()
    assert first.headers["x-daari-tier"] == "L3" and first.headers["x-daari-cache"] == "miss"
    assert response.object == "response" and response.status == "completed"
    assert response.id.startswith("resp_") and response.model == "good"
    assert "monad" in response.output_text
    assert response.output[0].type == "message" and response.output[0].content[0].type == "output_text"
    assert response.usage is not None and response.usage.output_tokens > 0
    meta = response.model_extra["daari_meta"]
    assert meta["tier"] == "L3" and meta["cache_hit"] is False
    sent = fake.requests[-1].body
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sent["messages"][1]["role"] == "user"
    again = client.responses.create(model="good", input="what is a monad?", instructions="Be brief.")
    assert again.model_extra["daari_meta"]["tier"] == "L0"
    assert again.output_text == response.output_text and again.id != response.id
    assert len(fake.requests) == 1


def test_stream_sends_the_full_event_sequence(client: openai.OpenAI) -> None:
    with client.responses.stream(model="good", input="tell me about trio nurseries") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert "response.output_text.delta" in kinds
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert final.output_text == text and "trio" in text
    assert final.model_extra["daari_meta"]["tier"] == "L3"
    # The L0 hit streams the same sequence.
    with client.responses.stream(model="good", input="tell me about trio nurseries") as stream:
        replayed = list(stream)
        hit = stream.get_final_response()
    assert hit.model_extra["daari_meta"]["cache_hit"] is True and hit.output_text == text
    assert [e.type for e in replayed][:4] == kinds[:4] and replayed[-1].type == "response.completed"


def test_function_call_round_trip(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    first = client.responses.create(model="tools", input="weather in Paris?", tools=[WEATHER])  # type: ignore[list-item]
    call = first.output[-1]
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "example"}
    assert first.model_extra["daari_meta"]["agent_turn"] is True
    assert fake.requests[-1].body["tools"][0]["function"]["name"] == "get_weather"
    second = client.responses.create(
        model="tools", tools=[WEATHER],  # type: ignore[list-item]
        input=[{"role": "user", "content": "weather in Paris?"},
               {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21C"}])
    assert "sunny, 21C" in second.output_text
    sent = fake.requests[-1].body["messages"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id
    assert sent[2] == {"role": "tool", "content": "sunny, 21C", "tool_call_id": call.call_id}


def test_function_call_stream_events(client: openai.OpenAI) -> None:
    with client.responses.stream(model="tools", input="weather in Oslo?", tools=[WEATHER]) as stream:  # type: ignore[list-item]
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
    call = final.output[-1]
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "example"}


def test_previous_response_id_continues_the_conversation(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    first = client.responses.create(model="good", input="my name is Ada", instructions="Be brief.")
    second = client.responses.create(model="good", input="what is my name?", previous_response_id=first.id)
    sent = fake.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]  # instructions are not carried over
    assert sent[0]["content"] == [{"type": "text", "text": "my name is Ada"}] or sent[0]["content"] == "my name is Ada"
    assert sent[1]["content"] == first.output_text
    assert second.previous_response_id == first.id
    fetched = client.responses.retrieve(second.id)
    assert fetched.id == second.id and fetched.output_text == second.output_text


def test_unknown_previous_response_is_a_404_in_openai_shape(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="good", input="hi", previous_response_id="resp_nope")
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["code"] == "previous_response_not_found" and body["param"] == "previous_response_id"
    assert fake.requests == []
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_nope")


def test_store_false_is_not_kept(client: openai.OpenAI) -> None:
    response = client.responses.create(model="good", input="do not keep this", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="good", input="and then?", previous_response_id=response.id)


def test_delete_a_stored_response(client: openai.OpenAI) -> None:
    response = client.responses.create(model="good", input="keep this for a moment")
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)


def test_a_hosted_tool_is_dropped_for_a_chat_tier_and_said_so(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    raw = client.responses.with_raw_response.create(model="good", input="search the web",
                                                    tools=[{"type": "web_search"}])
    response = raw.parse()
    assert raw.headers["x-daari-dropped-tools"] == "web_search"
    assert response.model_extra["daari_meta"]["dropped_tools"] == ["web_search"]
    assert response.status == "completed" and "tools" not in fake.requests[-1].body  # answered without it


def test_freeform_tool_round_trip_through_a_chat_upstream(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    patch_tool = {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
                  "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
    first = client.responses.create(model="tools", input="add a file", tools=[patch_tool])  # type: ignore[list-item]
    sent = fake.requests[-1].body["tools"][0]["function"]
    assert sent["name"] == "apply_patch" and sent["parameters"]["required"] == ["input"]
    assert "start: /.+/" in sent["description"]  # the grammar is told to the model
    call = first.output[-1]
    assert call.type == "custom_tool_call" and call.input == "example"
    assert first.model_extra["daari_meta"]["translated"] == [
        "custom tool 'apply_patch': a function with one string argument; its grammar is not enforced"]
    with client.responses.stream(model="tools", input="add a file", tools=[patch_tool]) as stream:  # type: ignore[list-item]
        kinds = [e.type for e in stream]
        streamed = stream.get_final_response()
    assert "response.custom_tool_call_input.done" in kinds and streamed.output[-1].type == "custom_tool_call"
    assert streamed.model_extra["daari_meta"]["translated"]
    second = client.responses.create(model="tools", tools=[patch_tool], input=[  # type: ignore[list-item]
        {"role": "user", "content": "add a file"},
        {"type": "custom_tool_call", "call_id": call.call_id, "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"}])
    assert "Done!" in second.output_text
    messages = fake.requests[-1].body["messages"]
    assert json.loads(messages[1]["tool_calls"][0]["function"]["arguments"]) == {"input": "*** Begin Patch"}
    assert messages[2] == {"role": "tool", "content": "Done!", "tool_call_id": call.call_id}


def test_bad_input_is_a_400_naming_the_field(server_url: str) -> None:
    reply = httpx.post(server_url + "/v1/responses", json={"model": "good", "input": 42})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "input"
    reply = httpx.post(server_url + "/v1/responses", json={"model": "good", "input": [{"type": "message",
                                                                                       "role": "robot"}]})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "input[0].role"


def test_upstream_failure_mid_stream_is_response_failed(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    fake.script = ["drop"]
    with client.responses.stream(model="good", input="this will break off") as stream:
        events = list(stream)
    assert events[0].type == "response.created"
    failed = events[-1]
    assert failed.type == "response.failed" and failed.response.status == "failed"
    assert failed.response.error is not None
    assert failed.response.model_extra["daari_meta"]["error"]
    assert any(e.type == "error" for e in events)


def test_length_is_an_incomplete_response(client: openai.OpenAI) -> None:
    response = client.responses.create(model="length", input="go on forever")
    assert response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"
    with client.responses.stream(model="length", input="go on and on") as stream:
        events = list(stream)
    assert events[-1].type == "response.incomplete" and events[-1].response.status == "incomplete"


def test_namespaced_function_call_comes_back_in_its_namespace(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    namespace = {"type": "namespace", "name": "crm", "description": "Customer records",
                 "tools": [{"type": "function", "name": "lookup", "description": "Find a customer",
                            "parameters": {"type": "object", "properties": {"who": {"type": "string"}},
                                           "required": ["who"]}}]}
    response = client.responses.create(model="tools", input="find Ada", tools=[namespace])  # type: ignore[list-item]
    assert fake.requests[-1].body["tools"][0]["function"]["name"] == "crm__lookup"
    call = response.output[-1]
    assert call.type == "function_call" and call.name == "lookup" and call.namespace == "crm"


def test_input_items_of_a_stored_response(client: openai.OpenAI) -> None:
    first = client.responses.create(model="good", input="first question")
    second = client.responses.create(model="good", previous_response_id=first.id, input=[
        {"role": "user", "content": "second question"}, {"role": "user", "content": "third question"}])
    page = client.responses.input_items.list(second.id, order="asc", limit=2)
    assert page.has_more and [item.type for item in page.data] == ["message", "message"]
    everything = list(client.responses.input_items.list(second.id, order="asc", limit=2))  # follows `after`
    texts = [item.content[0].text for item in everything]  # type: ignore[union-attr]
    assert texts == ["first question", first.output_text, "second question", "third question"]
    newest = client.responses.input_items.list(second.id).data[0]
    assert newest.content[0].text == "third question"  # type: ignore[union-attr]
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list("resp_nope")
