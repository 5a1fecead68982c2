"""Safe on localhost: foreign Hosts (DNS rebinding), web pages, non-JSON posts and callers without the token
are refused in the client's own error shape, through a running daari."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from daari import cli
from daari.config import ServerConfig
from daari.errors import StartupError
from daari.server.guard import GuardPolicy, host_name, is_loopback, require_token_where_needed
from daari.server.serve import run_server
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

OPENAI_CHAT = {"model": "good", "messages": [{"role": "user", "content": "hello"}]}
ANTHROPIC_CHAT = {"model": "good", "max_tokens": 20, "messages": [{"role": "user", "content": "hello"}]}


def openai_error(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    return body


def anthropic_error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert body["type"] == "error"
    error: dict[str, Any] = body["error"]
    return error


async def test_foreign_host_is_403_on_every_endpoint_in_the_clients_shape(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             server={"allowed_hosts": ["daari.lan"]})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            evil = {"host": "evil.example"}
            for path in ("/v1/daari/config", "/healthz", "/metrics", "/v1/models", "/nope"):
                refused = await client.get(path, headers=evil)
                assert refused.status_code == 403, path
                assert openai_error(refused)["type"] == "permission_error"
            refused = await client.post("/v1/chat/completions", json=OPENAI_CHAT, headers=evil)
            assert refused.status_code == 403 and "evil.example" in openai_error(refused)["message"]
            refused = await client.post("/v1/messages", json=ANTHROPIC_CHAT, headers={"host": "evil.example:80"})
            assert refused.status_code == 403 and anthropic_error(refused)["type"] == "permission_error"
            assert fake.requests == []
            port = server.url.rsplit(":", 1)[1]
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "daari.lan", "LOCALHOST."):
                assert (await client.get("/v1/daari/config", headers={"host": host})).status_code == 200, host
            assert (await client.post("/v1/chat/completions", json=OPENAI_CHAT)).status_code == 200


async def test_web_pages_are_refused_and_get_no_cors_headers(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            page = {"origin": "https://evil.example"}
            refused = await client.post("/v1/chat/completions", json=OPENAI_CHAT, headers=page)
            assert refused.status_code == 403 and "server.allowed_origins" in openai_error(refused)["message"]
            refused = await client.post("/v1/messages", json=ANTHROPIC_CHAT, headers={"origin": "null"})
            assert refused.status_code == 403 and anthropic_error(refused)["type"] == "permission_error"
            assert (await client.get("/v1/daari/config", headers=page)).status_code == 403
            preflight = await client.options("/v1/chat/completions", headers={
                **page, "access-control-request-method": "POST"})
            assert preflight.status_code == 403
            # A "simple" cross-site POST (no preflight): text/plain, a form, or no type at all.
            for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
                headers = {"content-type": content_type} if content_type else {}
                refused = await client.post("/v1/chat/completions", content=b'{"model": "good"}', headers=headers)
                assert refused.status_code == 415, content_type
                assert openai_error(refused)["code"] == "unsupported_media_type"
            refused = await client.post("/v1/messages", content=b"{}", headers={"content-type": "text/plain"})
            assert refused.status_code == 415 and anthropic_error(refused)["type"] == "invalid_request_error"
            assert fake.requests == []
            ok = await client.post("/v1/chat/completions", json=OPENAI_CHAT,
                                   headers={"content-type": "application/json; charset=utf-8"})
            assert ok.status_code == 200
            assert not [h for h in ok.headers if h.startswith("access-control-")]


async def test_configured_origin_gets_cors(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             server={"allowed_origins": ["https://ui.example"]})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            origin = {"origin": "https://ui.example"}
            preflight = await client.options("/v1/chat/completions", headers={
                **origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type"})
            assert preflight.status_code == 204
            assert preflight.headers["access-control-allow-origin"] == "https://ui.example"
            assert "POST" in preflight.headers["access-control-allow-methods"]
            ok = await client.post("/v1/chat/completions", json=OPENAI_CHAT, headers=origin)
            assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "https://ui.example"
            other = await client.post("/v1/chat/completions", json=OPENAI_CHAT,
                                      headers={"origin": "https://ui.example.evil"})
            assert other.status_code == 403 and "access-control-allow-origin" not in other.headers


async def test_token_is_required_when_set_and_never_forwarded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TEST_TOKEN", "daari-token-0123456789")
    monkeypatch.setenv("DAARI_TEST_UPSTREAM_KEY", "sk-upstream-0123456789")
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1", api_key_env="DAARI_TEST_UPSTREAM_KEY")
        config = make_config(tmp_path, tiers={"L3": tier}, server={"token_env": "DAARI_TEST_TOKEN"})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            for headers in ({}, {"x-daari-token": "wrong"}, {"authorization": "Bearer wrong"}):
                refused = await client.post("/v1/chat/completions", json=OPENAI_CHAT, headers=headers)
                assert refused.status_code == 401 and openai_error(refused)["type"] == "authentication_error"
                assert (await client.get("/healthz", headers=headers)).status_code == 401
            refused = await client.post("/v1/messages", json=ANTHROPIC_CHAT, headers={"x-api-key": "sk-ant-x"})
            assert refused.status_code == 401 and anthropic_error(refused)["type"] == "authentication_error"
            assert fake.requests == []
            by_header = await client.post("/v1/chat/completions", json=OPENAI_CHAT,
                                          headers={"x-daari-token": "daari-token-0123456789"})
            assert by_header.status_code == 200
            ask = {**OPENAI_CHAT, "messages": [{"role": "user", "content": "bearer"}]}
            by_bearer = await client.post("/v1/chat/completions", json=ask,
                                          headers={"authorization": "Bearer daari-token-0123456789"})
            assert by_bearer.status_code == 200
            sent = [r.headers for r in fake.requests]
            assert all(h["authorization"] == "Bearer sk-upstream-0123456789" for h in sent)
            assert all("x-daari-token" not in h for h in sent)


def test_binding_off_loopback_needs_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("DAARI_TOKEN", raising=False)
    config = tmp_path / "daari.yaml"
    config.write_text("tiers:\n  L3: {executor: openai, base_url: 'http://127.0.0.1:9/v1'}\n")
    assert cli.main(["serve", "--config", str(config), "--host", "0.0.0.0", "--port", "0",
                     "--data-dir", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "without a token" in err[-1] and "DAARI_TOKEN" in err[-1]
    assert not (tmp_path / "d").exists()  # refused before anything was opened
    with pytest.raises(StartupError):
        require_token_where_needed(ServerConfig(host="192.168.1.5"), GuardPolicy.from_config(
            ServerConfig(host="192.168.1.5"), {}))
    server = ServerConfig(host="0.0.0.0")
    require_token_where_needed(server, GuardPolicy.from_config(server, {"DAARI_TOKEN": "t0ken-value"}))
    for loopback in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        require_token_where_needed(ServerConfig(host=loopback), GuardPolicy.from_config(ServerConfig(), {}))
        assert is_loopback(loopback)


def test_host_names() -> None:
    assert host_name("[::1]:8787") == "::1"
    assert host_name("::1") == "::1"
    assert host_name("Example.COM.:443") == "example.com"
    assert not is_loopback("localhost.evil.example")


async def _handshake(url: str, host: str, extra: str = "", path: str = "/v1/daari/tail") -> bytes:
    """A raw websocket upgrade request; returns what the server answered before closing."""
    address = url.removeprefix("http://")
    ip, port = address.rsplit(":", 1)
    stream = await trio.open_tcp_stream(ip, int(port))
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n")
    async with stream:
        await stream.send_all(request.encode())
        received = b""
        with trio.fail_after(10):  # the refusal ends with the last chunk of its body, or with EOF
            while not received.endswith(b"0\r\n\r\n"):
                if received.startswith(b"HTTP/1.1 101") and b"\r\n\r\n" in received:
                    break  # accepted: the connection stays open as a websocket
                chunk = await stream.receive_some()
                if not chunk:
                    break
                received += chunk
    return received


async def test_websocket_handshakes_go_through_the_guard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TEST_TOKEN", "daari-token-0123456789")
    config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", "http://127.0.0.1:9/v1")},
                         server={"token_env": "DAARI_TEST_TOKEN"})
    async with daari_server(config) as server:
        port = server.url.rsplit(":", 1)[1]
        token = "x-daari-token: daari-token-0123456789\r\n"
        rebinding = await _handshake(server.url, "evil.example", token)
        assert rebinding.startswith(b"HTTP/1.1 403") and b"permission_error" in rebinding
        page = await _handshake(server.url, f"127.0.0.1:{port}", token + "Origin: https://evil.example\r\n")
        assert page.startswith(b"HTTP/1.1 403") and b"allowed_origins" in page
        no_token = await _handshake(server.url, f"127.0.0.1:{port}")
        assert no_token.startswith(b"HTTP/1.1 401") and b"authentication_error" in no_token
        allowed = await _handshake(server.url, f"127.0.0.1:{port}", token)
        assert allowed.startswith(b"HTTP/1.1 101")
        # A browser cannot set headers on a websocket: daari's own page passes the token in the query.
        in_query = await _handshake(server.url, f"127.0.0.1:{port}", path="/v1/daari/tail?token=daari-token-0123456789")
        assert in_query.startswith(b"HTTP/1.1 101")
        wrong = await _handshake(server.url, f"127.0.0.1:{port}", path="/v1/daari/tail?token=guess")
        assert wrong.startswith(b"HTTP/1.1 401")
        async with httpx.AsyncClient(base_url=server.url) as client:
            ui_page = await client.get("/ui", params={"token": "daari-token-0123456789"})
            no_page = await client.get("/ui")
            not_elsewhere = await client.get("/v1/daari/config", params={"token": "daari-token-0123456789"})
        assert ui_page.status_code == 200 and "<title>daari" in ui_page.text
        assert no_page.status_code == 401 and not_elsewhere.status_code == 401


async def test_off_loopback_with_a_token_starts_and_demands_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TEST_TOKEN", "daari-token-0123456789")
    config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", "http://127.0.0.1:9/v1")},
                         server={"host": "0.0.0.0", "token_env": "DAARI_TEST_TOKEN", "allowed_hosts": ["devbox.lan"]})
    async with daari_server(config) as server:
        port = server.url.rsplit(":", 1)[1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/v1/daari/config")).status_code == 401
            token = {"x-daari-token": "daari-token-0123456789"}
            assert (await client.get("/v1/daari/config", headers=token)).status_code == 200
            assert (await client.get("/v1/daari/config", headers={**token, "host": "devbox.lan"})).status_code == 200
            assert (await client.get("/v1/daari/config", headers={**token, "host": "0.0.0.0"})).status_code == 403


async def test_any_host_without_a_token_refuses_to_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`allowed_hosts: ["*"]` turns the Host check off: on loopback with no token, a rebinding page (Host and
    Origin both `rebind.example:PORT`) would be same-origin and read the config. It needs the token."""
    monkeypatch.delenv("DAARI_TOKEN", raising=False)
    config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", "http://127.0.0.1:9/v1")},
                         server={"allowed_hosts": ["*"]})
    with pytest.raises(StartupError, match=r"allowed_hosts.*token"):
        await run_server(config)
    assert not (tmp_path / "data").exists()  # refused before anything was opened


async def test_any_host_with_a_token_still_demands_it_from_a_rebinding_page(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TEST_TOKEN", "daari-token-0123456789")
    config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", "http://127.0.0.1:9/v1")},
                         server={"allowed_hosts": ["*"], "token_env": "DAARI_TEST_TOKEN"})
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
        port = server.url.rsplit(":", 1)[1]
        rebinding = {"host": f"rebind.example:{port}", "origin": f"http://rebind.example:{port}"}
        refused = await client.get("/v1/daari/config", headers=rebinding)
        allowed = await client.get("/v1/daari/config",
                                   headers={**rebinding, "x-daari-token": "daari-token-0123456789"})
    assert refused.status_code == 401 and openai_error(refused)["type"] == "authentication_error"
    assert allowed.status_code == 200
