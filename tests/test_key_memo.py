"""The L0 key memo: a body sent again gets its key by its bytes, never across a partition, a tier override
or a route; bytes that differ but mean the same still find the stored answer (the key is worked out)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from daari.cache.key_memo import L0KeyMemo, memo_key
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

BODY = {"model": "good", "messages": [{"role": "user", "content": "what does git rebase -i do?"}]}


def test_the_memo_forgets_the_least_recently_used_first() -> None:
    memo = L0KeyMemo(max_entries=2)
    a, b, c = (memo_key(raw, "openai", None, "") for raw in (b"a", b"b", b"c"))
    memo.put(a, "ka")
    memo.put(b, "kb")
    assert memo.get(a) == "ka"  # a is now the most recent
    memo.put(c, "kc")
    assert (memo.get(a), memo.get(b), memo.get(c), len(memo)) == ("ka", None, "kc", 2)


def test_every_part_of_the_memo_key_tells_requests_apart() -> None:
    base = memo_key(b"{}", "openai", None, "")
    others = [memo_key(b"{ }", "openai", None, ""), memo_key(b"{}", "anthropic", None, ""),
              memo_key(b"{}", "openai", "L4", ""), memo_key(b"{}", "openai", None, "p1")]
    assert len({base, *others}) == 5
    assert memo_key(b"{}", "openai", None, "") == base


async def test_a_repeated_body_is_keyed_by_its_bytes_and_a_reworded_one_still_hits(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            memo = server.parts.key_memo
            compact, spaced = json.dumps(BODY, separators=(",", ":")), json.dumps(BODY, indent=2)
            headers = {"content-type": "application/json"}
            answers = [await client.post("/v1/chat/completions", content=raw, headers=headers)
                       for raw in (compact, compact, spaced)]
            assert [a.headers["x-daari-cache"] for a in answers] == ["miss", "hit", "hit"]
            assert len(memo) == 2  # the compact bytes once (then found), the spaced bytes once
            assert len(fake.requests) == 1
            # The same bytes under a tier override are another key: not the stored answer.
            override = await client.post("/v1/chat/completions", content=compact,
                                         headers={**headers, "x-daari-tier-override": "L3"})
            assert override.headers["x-daari-cache"] == "miss" and len(fake.requests) == 2
            assert len(memo) == 3


async def test_a_large_body_is_remembered_too(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             server={"thread_parse_bytes": 16})  # every body here is "large": worker threads
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            answers = [await client.post("/v1/chat/completions", json=BODY) for _ in range(2)]
            assert [a.headers["x-daari-cache"] for a in answers] == ["miss", "hit"]
            assert len(server.parts.key_memo) == 1 and len(fake.requests) == 1
