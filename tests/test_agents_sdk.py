"""The OpenAI Agents SDK in its default mode (the Responses API) through daari: a tool-using agent finishes
its loop, non-stream and streamed, with a chat-completions upstream (translated) and a Responses upstream."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

set_tracing_disabled(True)  # the SDK would export traces to OpenAI's servers otherwise
CALLS: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather for a city."""
    CALLS.append(city)
    return f"sunny in {city}"


@dataclass
class Setup:
    daari_url: str
    fake: FakeOpenAI | FakeResponses


@pytest.fixture(params=["chat", "responses"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    fake: FakeOpenAI | FakeResponses = FakeOpenAI() if request.param == "chat" else FakeResponses()
    with serve_app_in_thread(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", wire_api=request.param)
        with daari_in_thread(make_config(tmp_path, tiers={"L3": tier})) as server:
            yield Setup(server.url, fake)


def agent(url: str) -> Agent:
    """An agent in the SDK's default set-up: a model name, the default client pointed at daari."""
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test-not-a-real-key", max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    return Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather], model="tools")


def test_agent_tool_loop_non_stream(setup: Setup) -> None:
    CALLS.clear()
    result = Runner.run_sync(agent(setup.daari_url), "What is the weather in Paris?")
    assert CALLS == ["example"]  # the fakes fill a required string argument with "example"
    assert "sunny in example" in result.final_output
    expected = "/v1/responses" if isinstance(setup.fake, FakeResponses) else "/v1/chat/completions"
    assert [r.path for r in setup.fake.requests] == [expected, expected]
    # The SDK spoke the Responses API to daari (its default), and got daari's response ids back.
    assert all(r.response_id and r.response_id.startswith("resp_") for r in result.raw_responses)


def test_agent_tool_loop_streamed(setup: Setup) -> None:
    CALLS.clear()

    async def run() -> str:
        streamed = Runner.run_streamed(agent(setup.daari_url), "What is the weather in Oslo?")
        kinds = [event.type async for event in streamed.stream_events()]
        assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
        return str(streamed.final_output)

    final = asyncio.run(run())
    assert CALLS == ["example"] and "sunny in example" in final
