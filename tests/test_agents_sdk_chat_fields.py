"""The OpenAI Agents SDK in chat-completions mode: reasoning effort, verbosity and strict tool schemas reach an
OpenAI-compatible upstream (they never did before), and a repeated run is answered from L0."""

from __future__ import annotations

from pathlib import Path

import openai
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai.types.shared import Reasoning

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

set_tracing_disabled(True)  # the SDK would export traces to OpenAI's servers otherwise


@function_tool
def get_weather(city: str) -> str:
    """The weather for a city."""
    return f"sunny in {city}"


def test_chat_mode_fields_reach_the_upstream_and_repeat_is_l0(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
            settings = ModelSettings(reasoning=Reasoning(effort="high"), verbosity="low")
            agent = Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather],
                          model=OpenAIChatCompletionsModel(model="tools", openai_client=client),
                          model_settings=settings)
            first = Runner.run_sync(agent, "What is the weather in Paris?")
            assert "sunny in example" in first.final_output
            sent = fake.requests[0].body
            assert sent["reasoning_effort"] == "high" and sent["verbosity"] == "low"
            assert sent["tools"][0]["function"]["strict"] is True  # the SDK's strict schema, as it sent it
            upstream_calls = len(fake.requests)
            again = Runner.run_sync(agent, "What is the weather in Paris?")
            assert again.final_output == first.final_output
            assert len(fake.requests) == upstream_calls  # both turns from L0
