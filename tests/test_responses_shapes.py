"""Every body and stream event daari sends on /v1/responses validates against the official `openai` SDK's
own models (strict pydantic validation, not the SDK's lenient construct): answers from a chat upstream and
a Responses upstream, misses and L0 hits, text, tool calls, custom tool calls, incomplete and failed."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import BaseModel

from daari.protocol.sse import SSEDecoder
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

FUNCTION = {"type": "function", "name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}
CUSTOM = {"type": "custom", "name": "apply_patch", "description": "Apply a patch"}


def _event_models() -> dict[str, type[BaseModel]]:
    """The SDK's stream event model for each event type."""
    models: dict[str, type[BaseModel]] = {}
    pending: list[Any] = [ResponseStreamEvent]
    while pending:
        node = pending.pop()
        if isinstance(node, type) and issubclass(node, BaseModel):
            for literal in typing.get_args(node.model_fields["type"].annotation):
                models[literal] = node
        else:
            pending.extend(typing.get_args(node))
    return models


EVENT_MODELS = _event_models()


def validate(url: str, body: dict[str, Any]) -> list[str]:
    """POST `body`; validate what came back strictly; the event types (or the body's status)."""
    reply = httpx.post(url + "/v1/responses", json=body, timeout=30)
    assert reply.status_code == 200
    if not body.get("stream"):
        return [Response.model_validate(reply.json()).status or ""]
    decoder = SSEDecoder()
    kinds = []
    for item in decoder.feed(reply.content):
        data = json.loads(item.data)
        assert item.event == data["type"]
        EVENT_MODELS[data["type"]].model_validate(data)
        kinds.append(data["type"])
    assert not decoder.pending
    return kinds


def shape(kinds: list[str]) -> list[str]:
    """The event sequence with runs of one kind (deltas: a replay splits text its own way) as one."""
    return [kind for i, kind in enumerate(kinds) if i == 0 or kinds[i - 1] != kind]


@pytest.fixture(params=["chat", "responses"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, FakeOpenAI | FakeResponses]]:
    fake: FakeOpenAI | FakeResponses = FakeOpenAI() if request.param == "chat" else FakeResponses()
    with serve_app_in_thread(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", wire_api=request.param)
        with daari_in_thread(make_config(tmp_path, tiers={"L3": tier})) as server:
            yield server.url, fake


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model", ["good", "tools", "length"])
def test_answers_and_their_l0_replays_match_the_sdk_models(setup: tuple[str, Any], model: str, stream: bool) -> None:
    url, _ = setup
    body = {"model": model, "input": "hi there", "stream": stream, "tools": [FUNCTION]}
    first = validate(url, body)
    assert shape(validate(url, body)) == shape(first)  # the hit looks like the miss
    assert first[-1] in (("incomplete", "response.incomplete") if model == "length"
                         else ("completed", "response.completed"))


def test_failures_match_the_sdk_models(setup: tuple[str, Any]) -> None:
    url, fake = setup
    fake.script = ["drop" if isinstance(fake, FakeOpenAI) else "failed"]
    kinds = validate(url, {"model": "good", "input": "boom", "stream": True})
    assert kinds[-2:] == ["error", "response.failed"]


def test_custom_tool_calls_and_reasoning_match_the_sdk_models(tmp_path: Path) -> None:
    fake = FakeResponses()
    with serve_app_in_thread(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", wire_api="responses")
        with daari_in_thread(make_config(tmp_path, tiers={"L3": tier})) as server:
            for model, tools in (("tools", [CUSTOM]), ("good", [])):
                for stream in (False, True):
                    body = {"model": model, "input": "patch it", "tools": tools, "stream": stream,
                            "include": ["reasoning.encrypted_content"]}
                    assert shape(validate(server.url, body)) == shape(validate(server.url, body))


NAMESPACE = {"type": "namespace", "name": "crm", "description": "Customer records", "tools": [FUNCTION, CUSTOM]}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("tool", [CUSTOM, NAMESPACE], ids=["custom", "namespace"])
def test_freeform_and_namespaced_calls_match_the_sdk_models(setup: tuple[str, Any], stream: bool,
                                                            tool: dict[str, Any]) -> None:
    url, _ = setup
    body = {"model": "tools", "input": "patch it", "tools": [tool], "stream": stream}
    first = validate(url, body)
    assert shape(validate(url, body)) == shape(first)
