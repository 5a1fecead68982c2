"""A scripted agent loop with the openai SDK: repeated loops are free, a changed tool result never is."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

TOOLS = [{
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file from the workspace",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[openai.OpenAI, FakeOpenAI]]:
    """daari (data in tmp_path/data) in front of a fake upstream that calls tools."""
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server:
            yield openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0), fake


def run_loop(client: openai.OpenAI, file_content: str, stream: bool = False) -> list[dict]:
    """One agent task: ask, run the tool the model asks for, send the result, get the answer."""
    messages: list[dict] = [{"role": "user", "content": "Summarize README.md"}]
    metas = []
    for _ in range(3):
        if stream:
            chunks = list(client.chat.completions.create(model="tools", messages=messages, tools=TOOLS,
                                                         stream=True))
            meta = chunks[-1].model_extra["daari_meta"]
            calls: dict[int, dict] = {}
            text = ""
            for chunk in chunks:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                text += delta.content or ""
                for call in delta.tool_calls or []:
                    slot = calls.setdefault(call.index, {"id": None, "name": None, "arguments": ""})
                    slot["id"] = call.id or slot["id"]
                    slot["name"] = (call.function.name if call.function else None) or slot["name"]
                    slot["arguments"] += (call.function.arguments or "") if call.function else ""
            tool_calls = [{"id": c["id"], "type": "function",
                           "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls.values()]
        else:
            reply = client.chat.completions.create(model="tools", messages=messages, tools=TOOLS)
            meta = reply.model_extra["daari_meta"]
            message = reply.choices[0].message
            text = message.content or ""
            tool_calls = [c.model_dump() for c in message.tool_calls or []]
        metas.append(meta)
        if not tool_calls:
            return metas
        messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        for call in tool_calls:
            assert json.loads(call["function"]["arguments"])["path"]
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": file_content})
    raise AssertionError("the agent loop did not finish")


@pytest.mark.parametrize("stream", [False, True])
def test_identical_loop_is_all_l0_and_changed_tool_result_misses(
        setup: tuple[openai.OpenAI, FakeOpenAI], stream: bool) -> None:
    client, fake = setup
    first = run_loop(client, "# daari\nA local proxy.", stream)
    assert [m["tier"] for m in first] == ["L3", "L3"]
    assert all(m["agent_turn"] for m in first)
    calls_after_first = len(fake.requests)

    again = run_loop(client, "# daari\nA local proxy.", stream)
    assert [m["tier"] for m in again] == ["L0", "L0"]
    assert len(fake.requests) == calls_after_first  # nothing reached the upstream

    changed = run_loop(client, "# daari\nA local proxy, now with tests.", stream)
    # The first turn is identical (an L0 hit); the turn after the changed tool result is a miss.
    assert [m["tier"] for m in changed] == ["L0", "L3"]
    assert "now with tests" in fake.requests[-1].body["messages"][-1]["content"]


def test_agent_turn_entries_are_marked_exact_only(setup: tuple[openai.OpenAI, FakeOpenAI], tmp_path: Path) -> None:
    client, _ = setup
    run_loop(client, "# daari")
    client.chat.completions.create(model="good", messages=[{"role": "user", "content": "plain question"}])
    # The CacheActor writes to disk after acknowledging a put: wait (bounded) for the three rows.
    deadline = time.monotonic() + 10
    while True:
        rows = sqlite3.connect(tmp_path / "data" / "l0.sqlite").execute(
            "select agent_turn, semantic_ok, completion from l0").fetchall()
        if len(rows) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    flags = sorted((agent, ok, bool(json.loads(c)["tool_calls"])) for agent, ok, c in rows)
    # Two agent turns (one answered with a tool call) are exact-only; the plain chat may serve L1 later.
    assert flags == [(0, 1, False), (1, 0, False), (1, 0, True)]
