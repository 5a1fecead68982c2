"""AsgiSink's held JSON answer (`hold_json`): built whole, sent by its owner after the pipeline, never twice; and an
L0 hit over real HTTP still answers whole, with its length, and is one decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from daari.server.asgi_io import AsgiSink
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


async def test_a_held_answer_is_sent_only_by_its_owner_and_only_once() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    sink = AsgiSink(send, hold_json=True)
    await sink.send_json(200, {"answer": "é"}, {"x-daari-tier": "L0"})
    await sink.send_json(500, {"late": True}, {})  # a second answer: dropped, as the server drops one
    assert sent == [] and sink.finished
    held = sink.take_held()
    assert held is not None and sink.take_held() is None
    start, body = held
    assert start["status"] == 200
    assert body == {"type": "http.response.body", "body": json.dumps({"answer": "é"}, ensure_ascii=False,
                                                                      separators=(",", ":")).encode(),
                    "more_body": False}
    assert start["headers"] == [(b"content-type", b"application/json"), (b"x-daari-tier", b"L0"),
                                (b"content-length", str(len(body["body"])).encode())]


async def test_without_hold_the_answer_goes_out_at_once() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    sink = AsgiSink(send)
    await sink.send_json(404, {"error": "no"}, {})
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sink.take_held() is None


async def test_an_l0_hit_over_http_is_whole_and_one_decision(tmp_path: Path) -> None:
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1", "good")},
                             cache={"l1": {"enabled": False}})
        async with daari_server(config) as server:
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "held answers"}]}
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                first = await client.post("/v1/chat/completions", json=body)
                hit = await client.post("/v1/chat/completions", json=body)
                metrics = (await client.get("/metrics")).text
    assert first.status_code == hit.status_code == 200
    assert hit.headers["x-daari-cache"] == "hit" and hit.headers["x-daari-tier"] == "L0"
    assert int(hit.headers["content-length"]) == len(hit.content)
    assert hit.json()["choices"][0]["message"]["content"] == first.json()["choices"][0]["message"]["content"]
    assert hit.json()["daari_meta"]["tier"] == "L0"
    assert 'daari_requests_total{cache="hit",tier="L0"} 1.0' in metrics
