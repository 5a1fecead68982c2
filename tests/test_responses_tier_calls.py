"""Tool calls a Responses upstream answers are judged like any other: Codex's default model calls its freeform
`exec` tool (a `custom_tool_call` with JavaScript as its input), and namespaced tools come back with their
`namespace`. Found with the real Codex CLI 0.171 (`make test-clients`, `daari code codex`): daari read the
freeform input as the call's JSON arguments and the namespaced name as an unknown tool, judged the call 0,
served it with `below_confidence_threshold`, never stored it (a repeat asked the upstream again) and, with a
tier above, escalated a good call away. Real loopback HTTP, a fake Responses upstream, a chat tier above it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from daari.protocol.sse import SSEDecoder
from tests.codex_requests import default_model_request, headers
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.responses_upstream import PATCH, FakeResponses
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

CRM = {"type": "namespace", "name": "crm", "description": "Customer records", "tools": [
    {"type": "function", "name": "lookup", "description": "Find a customer",
     "parameters": {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}}]}


def final_response(reply: httpx.Response, stream: bool) -> dict[str, Any]:
    assert reply.status_code == 200, reply.text
    if not stream:
        body: dict[str, Any] = reply.json()
        return body
    events = [json.loads(e.data) for e in SSEDecoder().feed(reply.content)]
    assert events[-1]["type"] == "response.completed"
    response: dict[str, Any] = events[-1]["response"]
    return response


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_codex_exec_calls_from_a_responses_tier_pass_the_judge_and_are_replayed(tmp_path: Path,
                                                                                      stream: bool) -> None:
    responses, chat = FakeResponses(), FakeOpenAI()
    async with serve_app(responses) as upstream, serve_app(chat) as above:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1", wire_api="responses"),
                                              "L4": upstream_tier("openai", above + "/v1")},
                             cache={"l1": {"enabled": False}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            responses.script = ["tools"]
            sent = []
            for session in ("thread-a", "thread-b"):  # the same turn from two Codex sessions
                body = {**default_model_request("add hello.txt", session), "stream": stream}
                sent.append(final_response(await client.post("/v1/responses", json=body, headers=headers(session)),
                                           stream))
    first, again = sent
    [call] = first["output"]
    assert call["type"] == "custom_tool_call" and call["name"] == "exec" and call["input"] == PATCH
    meta = first["daari_meta"]
    assert meta["tier"] == "L3" and meta["confidence"] == 1.0 and "warning" not in meta
    assert [a["outcome"] for a in meta["attempts"]] == ["accepted"]
    assert chat.requests == []  # a good call is not escalated away
    # Stored, so the other session's identical turn is an L0 hit, the call replayed as Codex reads it.
    assert again["daari_meta"]["cache_hit"] is True
    assert again["output"][0]["type"] == "custom_tool_call" and again["output"][0]["input"] == PATCH
    assert len(responses.requests) == 1


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_a_namespaced_call_from_a_responses_tier_is_a_known_tool(tmp_path: Path, stream: bool) -> None:
    responses = FakeResponses()
    async with serve_app(responses) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1", wire_api="responses")},
                             cache={"l1": {"enabled": False}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            responses.script = ["tools"]
            body = {"model": "gpt-5.1", "input": "find ada@example.com", "tools": [CRM], "stream": stream}
            first = final_response(await client.post("/v1/responses", json=body), stream)
            again = final_response(await client.post("/v1/responses", json=body), stream)
    [call] = first["output"]
    assert call["type"] == "function_call" and (call["name"], call["namespace"]) == ("lookup", "crm")
    assert first["daari_meta"]["confidence"] == 1.0 and "warning" not in first["daari_meta"]
    assert again["daari_meta"]["cache_hit"] is True and len(responses.requests) == 1
