"""Codex with its default model through a chat-completions tier (issue 18's proof): its tools arrive only in
an `additional_tools` input item (tests/codex_requests.py, built from the Codex source), and the turn is an
agent turn whose tools reach the upstream, never an L1 hit; the hosted web_search it offers by default is
dropped and said so. Real loopback HTTP, a fake OpenAI upstream, the real L1 (embedding model, SQLite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio

from actors.semantic_cache import L1Count
from daari.pipeline.steps.l1 import SemanticTier
from daari.protocol.sse import SSEDecoder
from tests.codex_requests import default_model_request, exec_round, headers
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

ORIGINAL = "How do I list Docker containers?"
PARAPHRASE = "Show me the command to list docker containers"


def events(reply: httpx.Response) -> list[dict[str, Any]]:
    assert reply.status_code == 200, reply.text
    return [json.loads(e.data) for e in SSEDecoder().feed(reply.content)]


async def l1_ready(server: Any) -> SemanticTier:
    tier = server.parts.shortcuts["L1"]
    assert isinstance(tier, SemanticTier)
    with trio.fail_after(120):
        await tier.status.started.wait()
    assert tier.status.ready
    return tier


async def test_codex_default_model_turn_reaches_a_chat_tier_with_its_tools(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, \
            daari_server(make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})) as server, \
            httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        await l1_ready(server)
        fake.script = ["tools"]
        first = await client.post("/v1/responses", json=default_model_request("add hello.txt", "thread-a"),
                                  headers=headers("thread-a"))
        stream = events(first)
        sent = fake.requests[-1].body
        assert [t["function"]["name"] for t in sent["tools"]] == ["exec", "wait"]  # web_search dropped
        exec_tool = sent["tools"][0]["function"]
        assert exec_tool["parameters"]["required"] == ["input"] and "@exec:" in exec_tool["description"]
        assert sent["parallel_tool_calls"] is False
        assert sent["messages"][0] == {"role": "system", "content": "You are Codex, a coding agent based on GPT-5. "
                                                                    "You and the user share the same workspace."}
        final = stream[-1]["response"]
        meta = final["daari_meta"]
        assert meta["agent_turn"] is True and meta["tier"] == "L3"
        assert meta["dropped_tools"] == ["web_search"] and first.headers["x-daari-dropped-tools"] == "web_search"
        call = final["output"][-1]
        assert call["type"] == "custom_tool_call" and call["name"] == "exec" and "namespace" not in call
        assert call["input"] == "example"  # the function form's argument, back in Codex's freeform shape

        # The next turn carries the exec call and its output (content parts), as Codex sends them.
        fake.script = ["tools"]
        history = exec_round(call["call_id"], call["input"], "created hello.txt")
        second = events(await client.post("/v1/responses", headers=headers("thread-a"),
                                          json=default_model_request("add hello.txt", "thread-a", history)))
        messages = fake.requests[-1].body["messages"]
        assert messages[-2]["tool_calls"][0]["function"]["name"] == "exec"
        assert messages[-1] == {"role": "tool", "content": "created hello.txt", "tool_call_id": call["call_id"]}
        assert "created hello.txt" in second[-1]["response"]["output"][-1]["content"][0]["text"]

        # The first turn again from another session (new thread, item ids, cache key): an L0 hit.
        calls = len(fake.requests)
        again = events(await client.post("/v1/responses", headers=headers("thread-b"),
                                         json=default_model_request("add hello.txt", "thread-b")))
        assert again[-1]["response"]["daari_meta"]["tier"] == "L0" and len(fake.requests) == calls
        # Reworded, it is never an L1 hit: it goes to the tier.
        fake.script = ["tools"]
        reworded = events(await client.post("/v1/responses", headers=headers("thread-c"),
                                            json=default_model_request("please add the file hello.txt",
                                                                       "thread-c")))
        assert reworded[-1]["response"]["daari_meta"]["tier"] == "L3" and len(fake.requests) == calls + 1


async def test_an_unknown_shape_is_never_answered_from_l1_and_is_counted(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, \
            daari_server(make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})) as server, \
            httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        tier = await l1_ready(server)

        def chat(text: str, video: bool) -> dict[str, Any]:
            content: list[dict[str, Any]] = [{"type": "text", "text": text}]
            if video:  # a content part type daari does not know (a future client shape)
                content.append({"type": "input_video", "video_url": "https://example.com/a.mp4"})
            return {"model": "good", "messages": [{"role": "user", "content": content}]}

        # The control: without the unknown part, the paraphrase is an L1 hit.
        assert (await client.post("/v1/chat/completions", json=chat(ORIGINAL, False))).json()["daari_meta"][
            "tier"] == "L3"
        with trio.fail_after(10):
            while await tier.cache.call(L1Count()) < 1:
                await trio.sleep(0.01)
        assert (await client.post("/v1/chat/completions", json=chat(PARAPHRASE, False))).json()["daari_meta"][
            "tier"] == "L1"
        # With it: an agent turn, never stored in or served from L1.
        first = (await client.post("/v1/chat/completions", json=chat(ORIGINAL, True))).json()
        assert first["daari_meta"]["tier"] == "L3" and first["daari_meta"]["agent_turn"] is True
        calls = len(fake.requests)
        reworded = (await client.post("/v1/chat/completions", json=chat(PARAPHRASE, True))).json()
        assert reworded["daari_meta"]["tier"] == "L3" and len(fake.requests) == calls + 1
        metrics = (await client.get("/metrics")).text
        assert 'daari_unknown_request_shapes_total{kind="content_part:input_video",protocol="openai"} 2.0' in metrics
