"""The hit lane: the same bytes answered from L0 again are not decoded and parsed again, and a remembered parse
never reaches anything but a hit (cache/hit_requests.py, pipeline/steps/l0.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import daari.pipeline.steps.parse as parse_module
from daari.cache.hit_requests import HitRequests
from daari.cache.key_memo import memo_key
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.wire import OPENAI
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

OPENAI_BODY = {"model": "good", "messages": [{"role": "user", "content": "what does git stash pop do?"}]}
ANTHROPIC_BODY = {"model": "good", "max_tokens": 64, "messages": [{"role": "user", "content": "what is a rebase?"}]}


def _request(text: str, headers: dict[str, str] | None = None) -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content=text)], model="m",
                       passthrough_headers=dict(headers or {}), query_string="beta=true")


def test_a_remembered_request_keeps_no_caller_headers_and_each_caller_gets_its_own() -> None:
    requests = HitRequests()
    found_by = memo_key(b"{}", "openai", None, "")
    requests.put(found_by, _request("hi", {"authorization": "Bearer sk-canary", "session_id": "s1"}), 2)
    kept = requests.get(found_by)
    assert kept is not None and kept.passthrough_headers == {} and kept.query_string == ""
    mine = kept.for_caller({"session_id": "s2"}, "q=1")
    assert (mine.passthrough_headers, mine.query_string) == ({"session_id": "s2"}, "q=1")
    assert mine.messages is kept.messages and mine.model == "m"  # the parsed body is shared, not copied
    assert kept.passthrough_headers == {}  # the caller's headers went into the copy only


def test_remembered_requests_are_bounded_by_body_bytes_least_recently_used_first() -> None:
    requests = HitRequests(max_bytes=100)
    a, b, c, big = (memo_key(raw, "openai", None, "") for raw in (b"a", b"b", b"c", b"big"))
    requests.put(a, _request("a"), 40)
    requests.put(b, _request("b"), 40)
    assert requests.get(a) is not None  # a is now the most recent
    requests.put(c, _request("c"), 40)
    assert (requests.get(a) is not None, requests.get(b), requests.get(c) is not None) == (True, None, True)
    assert requests.body_bytes == 80
    requests.put(big, _request("big"), 101)  # larger than the whole budget: not kept, nothing evicted
    assert requests.get(big) is None and len(requests) == 2


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every request body the parse step decodes (the hit lane decodes none)."""
    seen: list[bytes] = []
    decode: Callable[[bytes], Any] = parse_module.decode_json

    def counting(raw: bytes) -> Any:
        seen.append(raw)
        return decode(raw)

    monkeypatch.setattr(parse_module, "decode_json", counting)
    return seen


@pytest.mark.parametrize(("path", "body", "headers", "stream"), [
    ("/v1/chat/completions", OPENAI_BODY, {}, False),
    ("/v1/chat/completions", OPENAI_BODY, {}, True),
    ("/v1/messages", ANTHROPIC_BODY, {"anthropic-version": "2023-06-01"}, False),
    ("/v1/messages", ANTHROPIC_BODY, {"anthropic-version": "2023-06-01"}, True),
])
async def test_the_third_copy_of_a_body_is_answered_without_parsing_it(
        tmp_path: Path, decodes: list[bytes], path: str, body: dict[str, Any], headers: dict[str, str],
        stream: bool) -> None:
    fake = FakeOpenAI()
    raw = json.dumps({**body, "stream": stream}).encode()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            send = {**headers, "content-type": "application/json"}
            answers = [await client.post(path, content=raw, headers=send) for _ in range(3)]
            assert [a.headers["x-daari-cache"] for a in answers] == ["miss", "hit", "hit"]
            assert len(fake.requests) == 1
            assert len(decodes) == 2  # the miss and the first hit; the third came down the hit lane
            assert len(server.parts.hit_requests) == 1
            # The lane's answer is the first hit's, but for its own ids.
            assert _content(answers[2], stream) == _content(answers[1], stream)
            assert answers[2].headers["x-daari-request-id"] != answers[1].headers["x-daari-request-id"]


async def test_the_lane_is_left_when_the_answer_is_not_in_memory_or_the_client_skips_the_cache(
        tmp_path: Path, decodes: list[bytes]) -> None:
    fake = FakeOpenAI()
    raw = json.dumps(OPENAI_BODY).encode()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            send = {"content-type": "application/json"}
            answers = [await client.post("/v1/chat/completions", content=raw, headers=send) for _ in range(2)]
            assert [a.headers["x-daari-cache"] for a in answers] == ["miss", "hit"], answers[1].text
            assert len(server.parts.hit_requests) == 1 and len(decodes) == 2
            # The answer leaves memory (evicted): the request is parsed again and found on disk.
            key = server.parts.key_memo.get(memo_key(raw, "openai", None, ""))
            assert key is not None
            memory = server.parts.l0_memory
            with trio.fail_after(30):  # ends a hang only: the writer's batch reaches disk when it is its turn
                while key in memory.pending:
                    await trio.sleep(0.01)
            memory.lru.pop(key)
            from_disk = await client.post("/v1/chat/completions", content=raw, headers=send)
            assert from_disk.headers["x-daari-cache"] == "hit" and len(decodes) == 3 and len(fake.requests) == 1
            # X-Daari-No-Cache: the same bytes go upstream, parsed, not down the lane.
            skipped = await client.post("/v1/chat/completions", content=raw,
                                        headers={**send, "x-daari-no-cache": "true"})
            assert skipped.headers["x-daari-cache"] == "bypass"
            assert len(decodes) == 4 and len(fake.requests) == 2


async def test_a_lane_hit_is_recorded_like_any_other_hit(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    raw = json.dumps(OPENAI_BODY).encode()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            decisions = server.parts.decisions.subscribe("test", buffer=16)
            for _ in range(3):
                await client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
            seen = [await decisions.receive() for _ in range(3)]
            first_hit, lane_hit = seen[1], seen[2]
            assert (lane_hit.cache, lane_hit.tier, lane_hit.status) == ("hit", "L0", 200)
            for field in ("model_requested", "stream", "prompt_hash", "task_type", "rule_id", "model"):
                assert getattr(lane_hit, field) == getattr(first_hit, field), field
            assert lane_hit.prompt_hash is not None


def _content(response: httpx.Response, stream: bool) -> Any:
    """What an answer says, without the parts that differ per response (ids, times, latency)."""
    if stream:
        texts = [line for line in response.text.splitlines() if line.startswith("data:")]
        return [_strip(json.loads(t[5:])) for t in texts if t[5:].strip() not in ("[DONE]",)]
    return _strip(response.json())


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("id", "created", "latency_ms", "daari_meta")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def test_the_openai_wire_parses_headers_as_its_passthrough_does() -> None:
    headers = {"authorization": "Bearer sk-x", "session_id": "s", "x-other": "no"}
    assert OPENAI.parse(OPENAI_BODY, headers).passthrough_headers == OPENAI.passthrough(headers)
