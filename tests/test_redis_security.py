"""The Redis link's credentials and TLS against a real redis-server: the password from its environment variable
(never in the config, /healthz or logs), a wrong one refused, TLS with the server's certificate checked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio
import trustme

from daari.cache.l0_redis import RedisL0
from daari.cache.l1_redis import RedisL1
from daari.cache.redis_link import LinkSettings, RedisLink
from daari.cache.store import NewL1Entry, StoreUnavailable
from daari.config import RedisConfig, config_from_dict
from daari.errors import ConfigError, StartupError
from daari.protocol.chat import Completion
from tests.redis_server import RedisServer, needs_redis
from tests.test_redis_stores import CONTEXT, entry, unit

SECRET = "s3cret-redis-pass-7f2a"


@asynccontextmanager
async def running(link: RedisLink) -> AsyncIterator[RedisLink]:
    """The link open for the block; the first PING answered (up) or failed (down) before it starts."""
    async with trio.open_nursery() as nursery:
        started = trio.Event()

        async def run() -> None:
            async with link.running():
                started.set()
                await trio.sleep_forever()

        nursery.start_soon(run)
        with trio.fail_after(20):
            await started.wait()
        yield link
        nursery.cancel_scope.cancel()


def settings(url: str, environ: dict[str, str], **config: Any) -> LinkSettings:
    return LinkSettings.from_config(RedisConfig(url=url, timeout_s=2.0, **config), environ)


@needs_redis
async def test_the_password_comes_from_its_environment_variable_and_is_never_shown(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server = RedisServer(tmp_path / "r", extra=["--requirepass", SECRET])
    server.start()
    try:
        async with running(RedisLink(settings(server.url, {"DAARI_REDIS_PASSWORD": SECRET},
                                              password_env="DAARI_REDIS_PASSWORD"))) as link:
            assert link.up
            store = RedisL0(link, "auth:")
            await store.write([("k", entry("behind a password"))], {})
            got = await store.get("k")
            assert got is not None and got.completion.text == "behind a password"
        async with running(RedisLink(settings(server.url, {"DAARI_REDIS_PASSWORD": "wrong"},
                                              password_env="DAARI_REDIS_PASSWORD"))) as refused:
            assert refused.state == "down" and refused.health()["last_error"]
            with pytest.raises(StoreUnavailable, match="is down"):
                await RedisL0(refused, "auth:").get("k")
        async with running(RedisLink(settings(server.url, {}))) as anonymous:
            assert anonymous.state == "down"  # no password: NOAUTH
    finally:
        server.stop()
    shown = repr(link.health()) + repr(refused.health()) + caplog.text + repr(link.settings.shown)
    assert SECRET not in shown


def test_a_password_env_that_is_not_set_stops_the_start() -> None:
    with pytest.raises(StartupError, match="DAARI_REDIS_PASSWORD"):
        settings("redis://127.0.0.1:6379/0", {}, password_env="DAARI_REDIS_PASSWORD")


@pytest.mark.parametrize(("redis", "message"), [
    ({"url": "redis://:hunter2@127.0.0.1:6379/0"}, "holds a password"),
    ({"url": "http://127.0.0.1:6379"}, "redis:// or rediss://"),
    ({"url": "redis://127.0.0.1:6379/0", "tls_ca_file": "/etc/ssl/ca.pem"}, "not rediss://"),
    ({"key_prefix": "team-*:"}, "glob character"),
])
def test_redis_settings_that_would_leak_or_skip_tls_are_config_errors(redis: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        config_from_dict({"cache": {"backend": "redis", "redis": redis}})
    assert "hunter2" not in str(caught.value)


def tls_files(tmp_path: Path, host: str) -> tuple[trustme.CA, tuple[Path, Path, Path]]:
    """A fresh CA and a server certificate it signed for `host`: (certificate, key, CA) files."""
    ca = trustme.CA()
    cert = ca.issue_cert(host)
    files = (tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem")
    cert.cert_chain_pems[0].write_to_path(str(files[0]))
    cert.private_key_pem.write_to_path(str(files[1]))
    ca.cert_pem.write_to_path(str(files[2]))
    return ca, files


@needs_redis
async def test_tls_checks_the_servers_certificate_and_its_host_name(tmp_path: Path) -> None:
    _, files = tls_files(tmp_path, "localhost")
    server = RedisServer(tmp_path / "r", tls=files)
    server.start()
    try:
        by_name = f"rediss://localhost:{server.port}/0"
        async with running(RedisLink(settings(by_name, {}, tls_ca_file=str(files[2])))) as link:
            assert link.up
            store = RedisL0(link, "tls:")
            await store.write([("k", entry("over TLS"))], {})
            got = await store.get("k")
            assert got is not None and got.completion.text == "over TLS"
        # The same server by an address its certificate does not name: refused (coredis alone would accept it).
        by_address = f"rediss://127.0.0.1:{server.port}/0"
        async with running(RedisLink(settings(by_address, {}, tls_ca_file=str(files[2])))) as wrong_host:
            assert wrong_host.state == "down"
        # Signed by a CA this daari was not told to trust: refused.
        (tmp_path / "other").mkdir()
        _, other = tls_files(tmp_path / "other", "localhost")
        async with running(RedisLink(settings(by_name, {}, tls_ca_file=str(other[2])))) as untrusted:
            assert untrusted.state == "down"
        assert "over TLS" in server.cli("GET", "tls:l0:k")
    finally:
        server.stop()


# The ACL docs/redis.md gives a cache's user: its own key prefix, the commands daari runs, nothing dangerous.
ACL_RULES = ["on", ">team-a-pass", "~team-a:*", "&*", "+@read", "+@write", "+@stream", "+@scripting", "+ping",
             "+hello", "+auth", "+time", "-@dangerous"]


@needs_redis
async def test_an_acl_user_limited_to_its_prefix_runs_daari_and_cannot_read_another_prefix(tmp_path: Path) -> None:
    """The documented ACL is enough for every store operation (L0 put and get, L1 put, read, follow, sweep), and
    Redis itself refuses that user another prefix's keys: a bug in daari could not read them."""
    server = RedisServer(tmp_path / "r")
    server.start()
    try:
        assert server.cli("ACL", "SETUSER", "team-a", *ACL_RULES) == "OK"
        server.cli("SET", "team-b:l0:k", "team b's answer")
        async with running(RedisLink(settings(server.url, {"PW": "team-a-pass"}, username="team-a",
                                              password_env="PW"))) as link:
            assert link.up, link.health()
            l0 = RedisL0(link, "team-a:")
            await l0.write([("k", entry("team a's answer"))], {"k": 1})
            got = await l0.get("k")
            assert got is not None and got.completion.text == "team a's answer"
            assert await l0.count() == 1
            l1 = RedisL1(link, "team-a:", max_entries=10, max_age_s=3600)
            first = await l1.put(NewL1Entry(CONTEXT, "list containers", unit(1), Completion(text="docker ps"), "L3"))
            assert set(await l1.get_many([first])) == {first}
            assert (await l1.vectors()).rows.row_ids.tolist() == [first]
            assert (await l1.evict(10, 3600)).below == first
            with trio.fail_after(10):
                async for rows in l1.follow(""):
                    assert np.allclose(rows.rows.vectors[0], unit(1))
                    break
            with pytest.raises(StoreUnavailable, match="no permissions"):
                await RedisL0(link, "team-b:").get("k")
            assert link.up  # a refusal is that command's failure, not Redis down
    finally:
        server.stop()
