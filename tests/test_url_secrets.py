"""A base_url's userinfo and query string are secrets: a canary in each is searched for in every output of a
real `daari serve` (startup table, logs at DEBUG, /healthz, /v1/daari/config, /metrics, error bodies)."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.test_cli import start_daari

CANARIES = ("canaryuser", "CANARYPASSWORD", "CANARYQUERYKEY", "CANARYDEADPW")


def test_url_credentials_never_show(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream:
        live = upstream.replace("http://", "http://canaryuser:CANARYPASSWORD@") + "/v1?key=CANARYQUERYKEY"
        dead = "http://someone:CANARYDEADPW@127.0.0.1:9/v1?api_key=CANARYQUERYKEY"
        config = tmp_path / "daari.yaml"
        config.write_text(f"tiers:\n  L3: {{executor: openai, base_url: '{live}', retry: {{max_retries: 0}}}}\n"
                          f"  L4: {{executor: openai, base_url: '{dead}', retry: {{max_retries: 0}}}}\n"
                          "routing: {escalation: false}\n")
        seen: list[str] = []
        proc, url = start_daari(["--config", str(config), "--port", "0", "--data-dir", str(tmp_path / "d")],
                                tmp_path, log_level="DEBUG", transcript=seen)
        try:
            with httpx.Client(base_url=url, timeout=30) as client:
                ok = client.post("/v1/chat/completions", json={
                    "model": "good", "messages": [{"role": "user", "content": "hi"}]})
                assert ok.status_code == 200
                echoed = client.post("/v1/chat/completions", json={
                    "model": "echo_url", "messages": [{"role": "user", "content": "hi"}]})
                assert echoed.status_code == 400 and "Bad request to" in echoed.text
                dead_tier = client.post("/v1/messages", headers={"x-daari-tier-override": "L4"}, json={
                    "model": "good", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
                assert dead_tier.status_code in (502, 503, 529)
                seen += [ok.text, echoed.text, dead_tier.text]
                for path in ("/healthz", "/v1/daari/config", "/metrics", "/v1/models"):
                    seen.append(client.get(path).text)
                config_body = client.get("/v1/daari/config").json()
                assert config_body["tiers"]["L3"]["base_url"].startswith("http://***@127.0.0.1:")
        finally:
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=30)
        seen.append(output)
    # The URL still works: the upstream got the query key and the credentials.
    assert fake.requests[0].query == "key=CANARYQUERYKEY"
    assert "Bad request to ?key=***" in echoed.text
    everything = "".join(seen)
    assert "***@127.0.0.1" in everything  # the startup table shows the tiers, redacted
    for text in seen:
        for canary in CANARIES:
            assert canary not in text, (canary, text[:2000])

