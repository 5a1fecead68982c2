"""The live tail through a running daari: filtered decisions in order, slow clients dropped, refusals, shutdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import ConnectionClosed, open_websocket_url

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


def ws_url(server_url: str, query: str = "") -> str:
    return server_url.replace("http://", "ws://") + "/v1/daari/tail" + (f"?{query}" if query else "")


async def ask(client: httpx.AsyncClient, content: str, **headers: str) -> httpx.Response:
    response = await client.post("/v1/chat/completions", headers=headers, json={
        "model": "good", "messages": [{"role": "user", "content": content}]})
    assert response.status_code == 200, response.text
    return response


async def until(predicate: Any) -> None:
    with trio.fail_after(10):
        while not predicate():
            await trio.sleep(0.01)


async def test_the_tail_streams_the_decisions_made_while_connected_in_order_and_filtered(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            await ask(client, "before anyone watched")
            async with open_websocket_url(ws_url(server.url)) as every, \
                    open_websocket_url(ws_url(server.url, "tier=L0&protocol=openai")) as hits_only:
                await until(lambda: server.parts.tail.open == 2)
                for text in ("first question", "second question", "first question"):
                    await ask(client, text)
                seen = [json.loads(await every.get_message()) for _ in range(3)]
                hit = json.loads(await hits_only.get_message())
    assert [d["tier"] for d in seen] == ["L3", "L3", "L0"]
    assert [d["cache"] for d in seen] == ["miss", "miss", "hit"]
    assert seen[0]["prompt_hash"] == seen[2]["prompt_hash"] != seen[1]["prompt_hash"]
    assert hit["request_id"] == seen[2]["request_id"] and hit["tier"] == "L0"
    assert all("first question" not in json.dumps(d) for d in seen)  # no content, only a keyed hash
    assert seen[0]["time"] <= seen[1]["time"] <= seen[2]["time"]


class SlowTailClient:
    """The ASGI side of a websocket client that reads slowly: its first message blocks until `release`.

    Driven through daari's real tail handler and hub; a real socket would need megabytes of unread
    decisions to fill the kernel's buffers before the server noticed anything.
    """

    def __init__(self) -> None:
        self.release = trio.Event()
        self.sent: list[dict[str, Any]] = []
        self.gone = trio.Event()

    async def receive(self) -> dict[str, Any]:
        if not self.sent:
            return {"type": "websocket.connect"}
        await self.gone.wait()
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "websocket.send" and len(self.sent) == 2:
            await self.release.wait()


async def test_a_subscriber_that_falls_behind_is_closed_while_requests_go_on(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             tail={"buffer": 2})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            slow = SlowTailClient()
            scope = {"type": "websocket", "path": "/v1/daari/tail", "query_string": b"", "headers": []}
            async with trio.open_nursery() as nursery, open_websocket_url(ws_url(server.url, "tier=L3")) as fast:
                nursery.start_soon(server.parts.tail, scope, slow.receive, slow.send)
                await until(lambda: server.parts.tail.open == 2)
                for index in range(6):  # every request is answered while the slow client holds its first message
                    await ask(client, f"question {index}")
                received = [json.loads(await fast.get_message()) for _ in range(6)]
                assert server.parts.decisions.dropped["tail"] == 1
                slow.release.set()
                await until(lambda: server.parts.tail.open == 1)
                slow.gone.set()
            metrics = (await client.get("/metrics")).text
    close = slow.sent[-1]
    assert close["type"] == "websocket.close" and close["code"] == 4008 and "fell behind" in close["reason"]
    assert [m["type"] for m in slow.sent[:2]] == ["websocket.accept", "websocket.send"]
    assert [d["tier"] for d in received] == ["L3"] * 6  # the fast client missed nothing
    assert 'daari_decision_subscribers_dropped_total{subscriber="tail"} 1.0' in metrics


async def test_a_client_that_reads_nothing_is_dropped_without_a_close_handshake(tmp_path: Path) -> None:
    async with daari_server(make_config(tmp_path, tail={"send_timeout_s": 0.2})) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        stalled = SlowTailClient()  # never released
        scope = {"type": "websocket", "path": "/v1/daari/tail", "query_string": b"", "headers": []}
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.parts.tail, scope, stalled.receive, stalled.send)
            await until(lambda: server.parts.tail.open == 1)
            await client.post("/v1/chat/completions", json={"model": "m", "messages": "not a list"})
            await until(lambda: server.parts.tail.open == 0)  # the handler gave up on its own
            stalled.gone.set()
    assert [m["type"] for m in stalled.sent] == ["websocket.accept", "websocket.send"]


async def test_a_client_that_leaves_leaves_no_subscription_behind(tmp_path: Path) -> None:
    async with daari_server(make_config(tmp_path)) as server:
        async with open_websocket_url(ws_url(server.url)):
            await until(lambda: server.parts.tail.open == 1)
            assert "tail" in server.parts.decisions.subscribers
        await until(lambda: server.parts.tail.open == 0)
        assert "tail" not in server.parts.decisions.subscribers


UPGRADE = {"connection": "Upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
           "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}


@pytest.mark.parametrize("headers", [
    {"host": "evil.example"},  # DNS rebinding: a foreign name that resolves here
    {"origin": "https://evil.example"},  # a web page's cross-site websocket
])
async def test_a_foreign_host_or_a_cross_site_origin_cannot_open_the_tail(tmp_path: Path,
                                                                          headers: dict[str, str]) -> None:
    async with daari_server(make_config(tmp_path)) as server:
        async with httpx.AsyncClient(base_url=server.url) as client:
            handshake = await client.get("/v1/daari/tail", headers={**UPGRADE, **headers})
        assert server.parts.tail.open == 0
        async with httpx.AsyncClient(base_url=server.url) as client:
            allowed = await client.get("/v1/daari/tail", headers=UPGRADE)  # the same handshake without them
    assert handshake.status_code == 403
    assert handshake.json()["error"]["type"] == "permission_error"
    assert allowed.status_code == 101


async def test_a_page_served_by_daari_itself_may_open_the_tail(tmp_path: Path) -> None:
    async with daari_server(make_config(tmp_path)) as server:
        origin = server.url.encode()  # http://127.0.0.1:PORT, the origin of GET /ui
        async with open_websocket_url(ws_url(server.url), extra_headers=[(b"origin", origin)]):
            await until(lambda: server.parts.tail.open == 1)


async def test_an_unknown_filter_is_closed_with_the_reason(tmp_path: Path) -> None:
    async with daari_server(make_config(tmp_path)) as server:
        async with open_websocket_url(ws_url(server.url, "colour=red")) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
    assert closed.value.reason is not None and closed.value.reason.code == 4400
    assert "colour" in (closed.value.reason.reason or "")


async def test_shutdown_closes_tails_at_once_with_going_away(tmp_path: Path) -> None:
    config = make_config(tmp_path, server={"port": 0, "grace_period_s": 30})
    async with trio.open_nursery() as nursery:
        from daari.server.serve import run_server

        server = await nursery.start(run_server, config)
        async with open_websocket_url(ws_url(server.url)) as ws:
            await until(lambda: server.parts.tail.open == 1)
            server.shutdown.set()
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
        # run_server returns by itself: the open tail did not hold Hypercorn's 30 s grace period.
    assert closed.value.reason is not None and closed.value.reason.code == 1001
