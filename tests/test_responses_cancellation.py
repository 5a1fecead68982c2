"""A Responses client that goes away mid-stream closes the upstream's stream, and nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import trio

from actors.cache import L0Count
from tests.fakes.responses_upstream import FakeResponses
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


async def wait_for(predicate, timeout: float = 2.0) -> None:  # type: ignore[no-untyped-def]
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.005)


async def test_client_disconnect_mid_native_stream_closes_upstream(tmp_path: Path) -> None:
    fake = FakeResponses()
    async with serve_app(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", wire_api="responses")
        async with daari_server(make_config(tmp_path, tiers={"L3": tier})) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            body = {"model": "hang", "input": "tell me about trio", "stream": True}
            response_id = None
            async with client.stream("POST", "/v1/responses", json=body) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.startswith("data:") and "response.created" in line:
                        response_id = json.loads(line.removeprefix("data:"))["response"]["id"]
                    if line.startswith("data:") and "output_text.delta" in line:
                        break  # text is flowing; now the client goes away
            await wait_for(lambda: fake.active_streams == 0 and fake.closed_streams == 1)
            assert await server.parts.cache.call(L0Count()) == 0
            assert response_id is not None
            stored = await client.get(f"/v1/responses/{response_id}")
            assert stored.status_code == 404  # an abandoned response is not kept
            ok = await client.post("/v1/responses", json={"model": "good", "input": "still there?"})
            assert ok.status_code == 200 and ok.json()["status"] == "completed"
