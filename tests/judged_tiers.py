"""The same request sent twice to a running daari whose tiers are fake OpenAI upstreams on loopback (a local L3,
and a frontier L6 when it is given a reply): what the judge made of each tier's answer, and whether the cache
kept the one served."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


@dataclass
class AskedTwice:
    first: httpx.Response
    second: httpx.Response
    l3: FakeOpenAI
    l6: FakeOpenAI | None


async def ask_twice(tmp_path: Path, route: str, body: dict[str, Any], *, l3_reply: str,
                    l6_reply: str | None = None) -> AskedTwice:
    l3 = FakeOpenAI()
    l3.reply = l3_reply
    l6 = None if l6_reply is None else FakeOpenAI()
    async with AsyncExitStack() as stack:
        tiers = {"L3": upstream_tier("openai", await stack.enter_async_context(serve_app(l3)) + "/v1")}
        if l6 is not None and l6_reply is not None:
            l6.reply = l6_reply
            tiers["L6"] = upstream_tier("openai", await stack.enter_async_context(serve_app(l6)) + "/v1")
        config = make_config(tmp_path, tiers=tiers, **({"frontier": {"enabled": True}} if l6 is not None else {}))
        server = await stack.enter_async_context(daari_server(config))
        client = await stack.enter_async_context(httpx.AsyncClient(base_url=server.url, timeout=60))
        first = await client.post(route, json=body)
        second = await client.post(route, json=body)
    return AskedTwice(first, second, l3, l6)
