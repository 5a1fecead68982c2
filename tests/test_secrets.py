"""Secrets never reach a client, the log, the config endpoint, metrics, health or the cache."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import httpx
import pytest

from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

SECRET = "sk-live-THISISASECRETKEY0123456789"
CLIENT_SECRET = "sk-ant-CLIENTSECRET9876543210"


async def test_keys_stay_secret_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("DAARI_TEST_KEY", SECRET)
    openai_fake, anthropic_fake = FakeOpenAI(), FakeAnthropic()
    async with serve_app(openai_fake) as u3, serve_app(anthropic_fake) as u6:
        tiers = {
            "L3": upstream_tier("openai", u3 + "/v1", api_key_env="DAARI_TEST_KEY", retry={"max_retries": 0}),
            "L6": upstream_tier("anthropic", u6, forward_client_key=True, retry={"max_retries": 0}),
        }
        config = make_config(tmp_path, tiers=tiers, frontier={"enabled": True},
                             routing={"escalation": False})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            seen: list[str] = []
            # An upstream that echoes the key it was given in its error message (error401 does).
            r = await client.post("/v1/chat/completions", json={
                "model": "error401", "messages": [{"role": "user", "content": "hi"}]})
            seen.append(r.text)
            assert r.status_code == 502 and "api_key_env" in r.json()["error"]["message"]
            ok = await client.post("/v1/chat/completions", headers={"authorization": "Bearer x"},
                                   json={"model": "good", "messages": [{"role": "user", "content": "hi"}]})
            seen.append(ok.text)
            assert openai_fake.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
            # The client's own Anthropic key, forwarded to L6 and echoed back by a careless upstream.
            r = await client.post("/v1/messages", headers={"x-api-key": CLIENT_SECRET, "x-daari-tier-override": "L6"},
                                  json={"model": "unauthorized", "max_tokens": 10,
                                        "messages": [{"role": "user", "content": "hi"}]})
            seen.append(r.text)
            assert r.status_code == 401 and "invalid x-api-key" in r.json()["error"]["message"]
            assert anthropic_fake.requests[-1].headers["x-api-key"] == CLIENT_SECRET
            for path in ("/v1/daari/config", "/healthz", "/metrics", "/v1/models"):
                seen.append((await client.get(path)).text)
            config_body = (await client.get("/v1/daari/config")).json()
            assert config_body["tiers"]["L3"]["api_key_env"] == "DAARI_TEST_KEY"
            assert config_body["tiers"]["L3"]["api_key_set"] is True
    stored = sqlite3.connect(tmp_path / "data" / "l0.sqlite").execute("select * from l0").fetchall()
    seen.append(repr(stored))
    seen.append(caplog.text)
    for text in seen:
        assert SECRET not in text and CLIENT_SECRET not in text
        assert "THISISASECRET" not in text and "CLIENTSECRET" not in text
