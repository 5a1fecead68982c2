"""A streamed answer's opening goes out with its first events: the client's first content comes in the write that
opens the stream, not one write later (one send less before the first token)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


async def call_app(app: Any, host: str, body: bytes) -> list[dict[str, Any]]:
    """daari's ASGI app called as Hypercorn calls it; every message it sends, in order."""
    to_app, receive = trio.open_memory_channel[dict[str, Any]](10)
    to_app.send_nowait({"type": "http.request", "body": body, "more_body": False})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
             "headers": [(b"host", host.encode()), (b"content-type", b"application/json"),
                         (b"x-daari-no-cache", b"true"), (b"content-length", str(len(body)).encode())]}
    await app(scope, receive.receive, send)
    return sent


def deltas(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:])["choices"][0]["delta"] for line in body.split(b"\n")
            if line.startswith(b"data: {") and json.loads(line[6:]).get("choices")]


async def test_the_first_write_of_a_stream_carries_its_opening_and_first_content(tmp_path: Path) -> None:
    async with serve_app(FakeOpenAI()) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1", "good")},
                             cache={"l1": {"enabled": False}})
        async with daari_server(config) as server:
            body = json.dumps({"model": "good", "stream": True,
                               "messages": [{"role": "user", "content": "How do I list files?"}]}).encode()
            sent = await call_app(server.parts.app, server.url.removeprefix("http://"), body)
            server.shutdown.set()
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    writes = [m["body"] for m in sent[1:] if m["type"] == "http.response.body" and m.get("body")]
    first = deltas(writes[0])
    assert first[0].get("role") == "assistant"  # the opening...
    assert any(d.get("content") for d in first)  # ...and the first content, in the same write
    whole = [d for w in writes for d in deltas(w)]
    assert "".join(d.get("content") or "" for d in whole)  # the whole answer still arrives
    assert b"daari_meta" in writes[-1]
