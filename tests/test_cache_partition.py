"""Cached answers never cross credentials: with forward_client_key, key A's answer is not key B's, nor a
keyless caller's, and neither the key nor its plain hash is stored."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import httpx

from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.protocol.chat import Completion
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

KEY_A = "sk-ant-KEYAAAAAAAAAAAAAAAA"
KEY_B = "sk-ant-KEYBBBBBBBBBBBBBBBB"
ASK = {"model": "good", "max_tokens": 50, "messages": [{"role": "user", "content": "partition me"}]}


class RecordingL1:
    """A shortcut tier that declines every request and remembers the partition it was shown."""

    name = "L1"
    serves_agent_turns = False

    def __init__(self) -> None:
        self.partitions: list[str] = []

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        self.partitions.append(query.partition)
        return None

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        return None


async def test_answers_paid_with_one_key_are_never_served_to_another(tmp_path: Path) -> None:
    fake = FakeAnthropic()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("anthropic", upstream, forward_client_key=True)},
                             frontier={"enabled": True})
        l1 = RecordingL1()
        async with daari_server(config, {"L1": l1}) as server, httpx.AsyncClient(base_url=server.url) as client:

            async def ask(headers: dict[str, str]) -> httpx.Response:
                return await client.post("/v1/messages", json=ASK, headers=headers)

            first = await ask({"x-api-key": KEY_A})
            assert first.status_code == 200 and first.json()["daari_meta"]["tier"] == "L6"
            again = await ask({"x-api-key": KEY_A})
            assert again.json()["daari_meta"]["tier"] == "L0"  # the same caller still gets its hits
            assert len(fake.requests) == 1
            other = await ask({"x-api-key": KEY_B})
            assert other.status_code == 200 and other.json()["daari_meta"]["tier"] == "L6"
            assert fake.requests[-1].headers["x-api-key"] == KEY_B
            bearer = await ask({"authorization": f"Bearer {KEY_B}"})  # another credential, another partition
            assert bearer.json()["daari_meta"]["tier"] == "L6"
            assert len(fake.requests) == 3
            keyless = await ask({})
            assert keyless.status_code == 401
            assert keyless.json()["error"]["type"] == "authentication_error"
            assert "content" not in keyless.json() and len(fake.requests) == 3
            openai_keyless = await client.post("/v1/chat/completions", json={
                "model": "good", "messages": ASK["messages"]})
            assert openai_keyless.status_code == 401 and "forward_client_key" in openai_keyless.text
            # L1 is shown the partition L0 uses: one per credential (the hit never reached it), "" for none.
            part_a, part_b, part_bearer, *keyless_parts = l1.partitions
            assert len({part_a, part_b, part_bearer}) == 3 and "" not in (part_a, part_b, part_bearer)
            assert keyless_parts == ["", ""]
    data = tmp_path / "data"
    stored = repr(sqlite3.connect(data / "l0.sqlite").execute("select * from l0").fetchall())
    for secret in (KEY_A, KEY_B, "KEYAAAA", hashlib.sha256(KEY_A.encode()).hexdigest()):
        assert secret not in stored
    assert (data / "partition.key").stat().st_mode & 0o777 == 0o600
    assert len((data / "partition.key").read_bytes()) == 32


async def test_the_partition_survives_a_restart(tmp_path: Path) -> None:
    fake = FakeAnthropic()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L6": upstream_tier("anthropic", upstream, forward_client_key=True)},
                             frontier={"enabled": True})
        for expected_tier in ("L6", "L0"):
            async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
                reply = await client.post("/v1/messages", json=ASK, headers={"x-api-key": KEY_A})
                assert reply.json()["daari_meta"]["tier"] == expected_tier
