"""The Responses API beside /v1/responses, and what reaches the client from a Responses tier: compact and
input_tokens reach it as sent (or daari answers as documented), its stream passes through byte for byte,
hosted tools follow each tier's `hosted_tools` policy. Real loopback HTTP against the fake upstreams."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from daari.protocol.sse import SSEDecoder
from tests.codex_requests import default_model_request, headers
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.serving import serve_app_in_thread
from tests.responses_schema import errors
from tests.support import daari_in_thread, make_config, upstream_tier

CONVERSATION = {"model": "good", "prompt_cache_key": "compact-test", "input": [
    {"type": "message", "role": "user", "content": "We launch on Tuesday."},
    {"type": "message", "role": "assistant", "content": "Understood: Tuesday."}]}


def test_compact_and_input_tokens_reach_a_responses_tier_as_sent(tmp_path: Path) -> None:
    fake = FakeResponses()
    with serve_app_in_thread(fake) as upstream, daari_in_thread(make_config(tmp_path, tiers={
            "L3": upstream_tier("openai", upstream + "/v1", wire_api="responses")})) as server:
        reply = httpx.post(server.url + "/v1/responses/compact", json=CONVERSATION, timeout=30,
                           headers={"session_id": "s1"})
        assert reply.status_code == 200 and reply.content == fake.sent  # byte for byte
        assert fake.requests[-1].path == "/v1/responses/compact" and fake.requests[-1].body == CONVERSATION
        assert fake.requests[-1].headers["session_id"] == "s1"
        assert errors("CompactResource", reply.json()) == []
        counted = httpx.post(server.url + "/v1/responses/input_tokens", json=CONVERSATION, timeout=30)
        assert counted.content == fake.sent and counted.json()["input_tokens"] == 14
        assert "x-daari-estimate" not in counted.headers


def test_without_a_responses_tier_compact_is_a_400_and_input_tokens_an_estimate(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream, daari_in_thread(make_config(tmp_path, tiers={
            "L3": upstream_tier("openai", upstream + "/v1")})) as server:
        refused = httpx.post(server.url + "/v1/responses/compact", json=CONVERSATION, timeout=30)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "unsupported_by_upstream"
        assert "wire_api: responses" in error["message"]
        missing = httpx.post(server.url + "/v1/responses/compact", json={"input": CONVERSATION["input"]}, timeout=30)
        assert missing.status_code == 400 and missing.json()["error"]["param"] == "model"
        counted = httpx.post(server.url + "/v1/responses/input_tokens", json=CONVERSATION, timeout=30)
        assert counted.status_code == 200 and counted.headers["x-daari-estimate"] == "true"
        assert counted.json()["object"] == "response.input_tokens" and counted.json()["input_tokens"] > 0
        assert fake.requests == []  # nothing was sent to a chat upstream


def test_a_responses_tier_stream_reaches_the_client_byte_for_byte(tmp_path: Path) -> None:
    fake = FakeResponses()
    with serve_app_in_thread(fake) as upstream, daari_in_thread(make_config(tmp_path, tiers={
            "L3": upstream_tier("openai", upstream + "/v1", wire_api="responses")})) as server:
        body = {"model": "good", "input": "explain cancel scopes", "stream": True}
        reply = httpx.post(server.url + "/v1/responses", json=body, timeout=30)
        upstream_bytes = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in
                                  fake._events("good", _last_response(reply)))
    # Every event but the terminal one is the upstream's own, as it sent it; the terminal one adds daari_meta.
    ours, theirs = reply.content.split(b"\n\n")[:-1], upstream_bytes.split(b"\n\n")[:-1]
    assert len(ours) == len(theirs) and ours[:-1] == theirs[:-1]
    terminal = json.loads(ours[-1].split(b"data: ", 1)[1])
    expected = json.loads(theirs[-1].split(b"data: ", 1)[1])
    assert terminal["response"].pop("daari_meta")["tier"] == "L3"
    assert terminal == expected


def _last_response(reply: httpx.Response) -> dict[str, Any]:
    """The upstream's final response, without what daari added (to rebuild the upstream's own events)."""
    events = [json.loads(e.data) for e in SSEDecoder().feed(reply.content)]
    final = dict(events[-1]["response"])
    final.pop("daari_meta")
    return final


@pytest.fixture
def chat_and_responses(tmp_path: Path) -> Any:
    """L3 a chat tier that refuses hosted tools, L6 a Responses tier."""
    chat, responses = FakeOpenAI(), FakeResponses()
    with serve_app_in_thread(chat) as u3, serve_app_in_thread(responses) as u6:
        tiers = {"L3": upstream_tier("openai", u3 + "/v1", hosted_tools="refuse"),
                 "L6": upstream_tier("openai", u6 + "/v1", wire_api="responses")}
        yield tmp_path, tiers, chat, responses


def test_hosted_tools_refused_by_a_tier_go_to_a_responses_tier(chat_and_responses: Any) -> None:
    tmp_path, tiers, chat, responses = chat_and_responses
    body = {"model": "good", "input": "what is new in trio?", "tools": [{"type": "web_search"}]}
    with daari_in_thread(make_config(tmp_path, tiers=tiers, frontier={"enabled": True})) as server:
        answer = httpx.post(server.url + "/v1/responses", json=body, timeout=30).json()
        assert answer["daari_meta"]["tier"] == "L6" and "dropped_tools" not in answer["daari_meta"]
        assert responses.requests[-1].body["tools"] == [{"type": "web_search"}] and chat.requests == []
    only_chat = {"L3": tiers["L3"]}
    with daari_in_thread(make_config(tmp_path / "only-chat", tiers=only_chat)) as server:  # a cold L0
        refused = httpx.post(server.url + "/v1/responses", json=body, timeout=30)
        assert refused.status_code == 400 and "web_search" in refused.json()["error"]["message"]
        assert "hosted_tools: refuse" in refused.json()["error"]["message"] and chat.requests == []


def test_dropped_tools_are_logged_once_per_session_and_history_reads_as_notes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream, daari_in_thread(make_config(tmp_path, tiers={
            "L3": upstream_tier("openai", upstream + "/v1")})) as server, caplog.at_level(logging.INFO):
        for task, session in (("add a.txt", "log-1"), ("add b.txt", "log-1"), ("add c.txt", "log-2")):
            reply = httpx.post(server.url + "/v1/responses", json=default_model_request(task, session),
                               headers=headers(session), timeout=30)
            assert reply.status_code == 200 and reply.headers["x-daari-dropped-tools"] == "web_search"
        lines = [r.getMessage() for r in caplog.records if "cannot run the hosted tools" in r.getMessage()]
        assert len(lines) == 2 and "[session log-1]" in lines[0] and "[session log-2]" in lines[1]
        history = [{"type": "web_search_call", "id": "ws_1", "status": "completed",
                    "action": {"type": "search", "query": "trio nursery"}}]
        body = default_model_request("summarise what you found", "log-3", history)
        answer = httpx.post(server.url + "/v1/responses", json={**body, "stream": False}, headers=headers("log-3"),
                            timeout=30).json()
        note = fake.requests[-1].body["messages"][-1]
        assert note["role"] == "assistant" and "web_search_call" in note["content"]
        assert "trio nursery" in note["content"]
        assert "hosted tool calls in the history read as notes: web_search_call" in answer["daari_meta"]["translated"]
