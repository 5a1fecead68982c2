"""`X-Daari-Tier-Override: L0` (docs/routing.md, step 3) pins the exact cache: the answer L0 holds for the request,
stored by an ordinary request, else a 404 `l0_miss`; never a model call. A model tier's override keeps its answers
apart from the ordinary ones (its key holds the override)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier
from tests.test_redis_backend import Labeled, chat, content


async def test_an_l0_override_is_answered_from_what_l0_holds_and_refused_when_it_holds_nothing(
        tmp_path: Path) -> None:
    fake = Labeled("up0")
    async with serve_app(fake) as url, httpx.AsyncClient() as client, daari_server(make_config(
            tmp_path, tiers={"L3": upstream_tier("openai", url + "/v1")}, cache={"l1": {"enabled": False}})) as server:
        first = (await client.post(server.url + "/v1/chat/completions", json=chat("what does git rebase do?"))).json()
        assert first["daari_meta"]["tier"] == "L3"
        pinned = await client.post(server.url + "/v1/chat/completions", json=chat("what does git rebase do?"),
                                   headers={"x-daari-tier-override": "L0"})
        assert pinned.status_code == 200, pinned.text
        assert pinned.json()["daari_meta"]["tier"] == "L0" and content(pinned.json()) == content(first)
        missing = await client.post(server.url + "/v1/chat/completions", json=chat("what does git bisect do?"),
                                    headers={"x-daari-tier-override": "L0"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "l0_miss"
        # An answer pinned to L3 is kept apart: the ordinary request and the L0 override do not see it.
        pinned_l3 = await client.post(server.url + "/v1/chat/completions", json=chat("what does git stash do?"),
                                      headers={"x-daari-tier-override": "L3"})
        assert pinned_l3.json()["daari_meta"]["tier"] == "L3"
        again = await client.post(server.url + "/v1/chat/completions", json=chat("what does git stash do?"),
                                  headers={"x-daari-tier-override": "L3"})
        assert again.json()["daari_meta"]["tier"] == "L0"
        assert (await client.post(server.url + "/v1/chat/completions", json=chat("what does git stash do?"),
                                  headers={"x-daari-tier-override": "L0"})).status_code == 404
        assert len(fake.requests) == 2
