"""The org cache (docs/redis.md, "Org cache"): `daari org-cache serve` in-process over loopback HTTP, a real
redis-server, running daari instances. Tenants never hit each other's entries, Redis itself refuses a tenant's user
another tenant's keys (NOPERM), the service refuses instances without a token, and an instance with an empty local
cache answers from L0-org."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from actors.org_l1 import TenantCount
from actors.semantic_cache import L1Count
from daari.cache.l0_redis import RedisL0
from daari.cache.l0_store import L0Entry
from daari.cache.partition import cache_partition
from daari.cache.redis_link import LinkSettings, RedisLink
from daari.cache.store import StoreUnavailable
from daari.config import RedisConfig
from daari.datadir import SECRET_FILE, load_secret, private_dir
from daari.errors import StartupError
from daari.org.api import CREDENTIALS_PATH
from daari.org_service.config import OrgServiceConfig, OrgToken
from daari.org_service.service import RunningService, run_org_service
from daari.pipeline.steps.l1 import SemanticTier
from daari.protocol.chat import Completion
from daari.server.compose import compose
from daari.server.serve import RunningServer
from daari.tenant import key_tenant
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.serving import serve_app
from tests.redis_server import RedisServer, free_port, needs_redis
from tests.support import daari_server, make_config, upstream_tier
from tests.test_redis_backend import Labeled, ask, chat, content, upstream_calls

pytestmark = needs_redis

TOKENS = {"team-a": "token-of-team-a-" + "x" * 24, "team-b": "token-of-team-b-" + "y" * 24,
          "team-c": "token-of-team-c-" + "w" * 24}
GATEWAY_TOKEN = "token-of-the-gateway-" + "z" * 24  # may use callers' key tenants
KEY_A = "sk-ant-KEYAAAAAAAAAAAAAAAA"
KEY_B = "sk-ant-KEYBBBBBBBBBBBBBBBB"


def sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@asynccontextmanager
async def org_service(tmp_path: Path, redis: RedisServer, sharing: tuple[str, ...] = ()
                      ) -> AsyncIterator[RunningService]:
    config = OrgServiceConfig(port=0, data_dir=str(tmp_path / "org"), redis=RedisConfig(url=redis.url),
                              sharing=list(sharing),
                              tokens=[*(OrgToken(f"{team}-box", sha(token), tenants=[team])
                                        for team, token in TOKENS.items()),
                                      OrgToken("gateway", sha(GATEWAY_TOKEN), key_tenants=True)])
    async with trio.open_nursery() as nursery:
        service: RunningService = await nursery.start(run_org_service, config)
        yield service
        nursery.cancel_scope.cancel()


def org_config(tmp_path: Path, name: str, upstream: str, service: str, team: str, **org: Any) -> Any:
    return make_config(tmp_path / name, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                       cache={"l1": {"enabled": False},
                              "org": {"url": service, "team": team, "token_env": f"ORG_TOKEN_{name.upper()}",
                                      "timeout_s": 2.0, **org}})


@asynccontextmanager
async def instances(tmp_path: Path, service: str, teams: list[str], monkeypatch: pytest.MonkeyPatch
                    ) -> AsyncIterator[tuple[list[RunningServer], list[Labeled]]]:
    """One daari per team given (a team may be given twice), each with its own data dir and upstream "up<i>"."""
    async with AsyncExitStack() as stack:
        fakes = [Labeled(f"up{i}") for i in range(len(teams))]
        urls = [await stack.enter_async_context(serve_app(fake)) for fake in fakes]
        servers = []
        for i, team in enumerate(teams):
            monkeypatch.setenv(f"ORG_TOKEN_D{i}", TOKENS[team])
            servers.append(await stack.enter_async_context(daari_server(org_config(
                tmp_path, f"d{i}", urls[i], service, team))))
        yield servers, fakes


async def org_entries(redis: RedisServer, tenant: str, count: int) -> list[str]:
    """The L0-org keys of `tenant` (a glob: "k*" is every key tenant), once `count` are there (org writes run in
    the background)."""
    with trio.fail_after(20):
        while True:
            keys = await org_entries_now(redis, tenant)
            if len(keys) >= count:
                return keys
            await trio.sleep(0.05)


async def org_entries_now(redis: RedisServer, tenant: str) -> list[str]:
    return [k for k in (await trio.to_thread.run_sync(redis.cli, "--scan", "--pattern",
                                                        f"t:{tenant}:l0:*")).splitlines() if k]


async def test_an_instance_with_an_empty_cache_answers_from_l0_org(tmp_path: Path, redis: RedisServer,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    async with org_service(tmp_path, redis) as service, \
            instances(tmp_path, service.url, ["team-a", "team-a"], monkeypatch) as ((one, two), fakes), \
            httpx.AsyncClient() as client:
        first = await ask(client, one.url, "what does git rebase do?")
        assert first["daari_meta"]["cache"] == "miss" and content(first).endswith("[up0]")
        await org_entries(redis, "team-a", 1)

        second = await ask(client, two.url, "what does git rebase do?")
        assert second["daari_meta"]["tier"] == "L0-org" and second["daari_meta"]["cache"] == "hit"
        assert content(second) == content(first)
        assert upstream_calls(fakes) == 1  # the second instance's upstream was never asked

        third = await ask(client, two.url, "what does git rebase do?")  # copied into its local L0 by the org hit
        assert third["daari_meta"]["tier"] == "L0" and content(third) == content(first)
        page = (await client.get(two.url + "/metrics")).text
        assert 'daari_org_cache_lookups_total{level="L0-org",result="hit"} 1.0' in page
        health = (await client.get(two.url + "/healthz")).json()
        assert health["org_cache"]["up"] == 1 and health["actors"]["org_cache"]["state"] == "running", health


async def test_two_tenants_never_hit_each_others_entries(tmp_path: Path, redis: RedisServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    prompts = ["what does git rebase do?", "What does git rebase do?", "what does git rebase  do ?",
               "what does git rebase do"]
    async with org_service(tmp_path, redis) as service, \
            instances(tmp_path, service.url, ["team-a", "team-b"], monkeypatch) as ((a, b), fakes), \
            httpx.AsyncClient() as client:
        answers_a = [await ask(client, a.url, prompt) for prompt in prompts]
        stored = sum(1 for x in answers_a if x["daari_meta"]["cache"] == "miss")  # prompts L0 tells apart
        keys_a = await org_entries(redis, "team-a", stored)
        for prompt in prompts:  # identical and near-identical prompts, after team-a stored them
            answer = await ask(client, b.url, prompt)
            assert answer["daari_meta"]["tier"] != "L0-org"
            assert content(answer).endswith("[up1]"), "team-b was served an answer team-a's upstream made"
        keys_b = await org_entries(redis, "team-b", len(keys_a))
        # The same requests make the same L0 keys: only the tenant prefix keeps them apart, and it does.
        assert {k.split(":", 3)[3] for k in keys_a} == {k.split(":", 3)[3] for k in keys_b}
        page = (await client.get(b.url + "/metrics")).text
        assert 'daari_org_cache_lookups_total{level="L0-org",result="hit"} 0.0' in page
        assert not any(content(x).endswith("[up1]") for x in answers_a)


async def credentials(client: httpx.AsyncClient, service: str, tenant: str, token: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    return await client.post(service + CREDENTIALS_PATH, json={"tenant": tenant}, headers=headers)


async def test_a_tenants_redis_user_cannot_read_or_write_another_tenants_keys(tmp_path: Path,
                                                                             redis: RedisServer) -> None:
    async with org_service(tmp_path, redis) as service, httpx.AsyncClient() as client:
        given = {team: (await credentials(client, service.url, team, TOKENS[team])).json() for team in TOKENS}
        links = {team: RedisLink(LinkSettings(c["url"], c["username"], c["password"], timeout_s=2.0), name=team)
                 for team, c in given.items()}
        async with links["team-a"].running(), links["team-b"].running():
            assert links["team-a"].up and links["team-b"].up
            b_own = RedisL0(links["team-b"], given["team-b"]["prefix"])
            entry = L0Entry(Completion(text="team-b's answer"), "L3")
            assert await b_own.write([("k1", entry)], {}) == {}
            assert (await b_own.get("k1")) is not None
            # team-a's user, asked (as a daari bug might) for team-b's key: Redis refuses.
            a_at_b = RedisL0(links["team-a"], given["team-b"]["prefix"])
            with pytest.raises(StoreUnavailable, match="no permissions"):  # NOPERM, as coredis words it
                await a_at_b.get("k1")
            with pytest.raises(StoreUnavailable, match="no permissions") as refused:  # NOPERM, as coredis words it
                await a_at_b.write([("k2", entry)], {})
            assert "team-b's answer" not in str(refused.value) and "k2" not in str(refused.value)  # logged: no content
            for command in (lambda c: c.keys("*"), lambda c: c.scan(0), lambda c: c.flushall(),
                            lambda c: c.acl_list(), lambda c: c.dbsize(), lambda c: c.script_flush(),
                            lambda c: c.function_flush(), lambda c: c.pubsub_channels()):
                with pytest.raises(StoreUnavailable, match="no permissions"):  # NOPERM, as coredis words it
                    await links["team-a"].run(command)
            assert links["team-a"].up  # a refusal is not an outage
        assert "NOPERM" in redis.cli("GET", "t:team-b:l0:k1", user=given["team-a"]["username"],
                                     password=given["team-a"]["password"])


async def test_the_service_refuses_instances_without_a_token_and_foreign_hosts(tmp_path: Path,
                                                                              redis: RedisServer) -> None:
    async with org_service(tmp_path, redis) as service, httpx.AsyncClient() as client:
        no_token = await credentials(client, service.url, "team-a", None)
        assert no_token.status_code == 401 and no_token.headers["www-authenticate"] == "Bearer"
        assert "password" not in no_token.text
        assert (await credentials(client, service.url, "team-a", "not-a-token")).status_code == 401
        assert (await credentials(client, service.url, "team-b", TOKENS["team-a"])).status_code == 403
        assert (await credentials(client, service.url, "Team A*", TOKENS["team-a"])).status_code == 400
        refused = await client.post(service.url + CREDENTIALS_PATH, json={"tenant": "team-a"},
                                    headers={"authorization": f"Bearer {TOKENS['team-a']}", "host": "evil.example"})
        assert refused.status_code == 403
        refused = await client.post(service.url + CREDENTIALS_PATH, json={"tenant": "team-a"},
                                    headers={"authorization": f"Bearer {TOKENS['team-a']}",
                                             "origin": "https://evil.example"})
        assert refused.status_code == 403
        good = await credentials(client, service.url, "team-a", TOKENS["team-a"])
        assert good.status_code == 200 and good.json()["prefix"] == "t:team-a:"


async def test_a_daari_without_its_org_token_does_not_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORG_TOKEN_D0", raising=False)
    config = org_config(tmp_path, "d0", "http://127.0.0.1:9", "http://127.0.0.1:9", "team-a")
    with pytest.raises(StartupError, match="ORG_TOKEN_D0"):
        await compose(config)


async def test_a_daari_with_a_wrong_token_serves_without_the_org_cache(tmp_path: Path, redis: RedisServer,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    async with org_service(tmp_path, redis) as service, AsyncExitStack() as stack, httpx.AsyncClient() as client:
        fake = Labeled("up0")
        url = await stack.enter_async_context(serve_app(fake))
        monkeypatch.setenv("ORG_TOKEN_D0", "a-token-the-service-does-not-know")
        server = await stack.enter_async_context(daari_server(org_config(tmp_path, "d0", url, service.url, "team-a")))
        answer = await ask(client, server.url, "what does git rebase do?")
        assert answer["daari_meta"]["cache"] == "miss" and content(answer).endswith("[up0]")
        page = (await client.get(server.url + "/metrics")).text
        assert 'daari_org_cache_setups_total{result="refused"}' in page
        assert 'daari_org_cache_lookups_total{level="L0-org",result="unavailable"}' in page


async def test_without_a_team_each_callers_key_is_its_own_tenant(tmp_path: Path, redis: RedisServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two instances sharing the partition secret: key A's answer is an L0-org hit for key A on the other instance,
    never for key B, although both ask the same thing."""
    secret = load_secret(tmp_path / "d0" / "data")
    (private_dir(tmp_path / "d1" / "data") / SECRET_FILE).write_bytes(secret)
    monkeypatch.setenv("ORG_TOKEN_GATEWAY", GATEWAY_TOKEN)
    ask_body = {"model": "good", "max_tokens": 50, "messages": [{"role": "user", "content": "partition me"}]}
    async with org_service(tmp_path, redis) as service, AsyncExitStack() as stack, httpx.AsyncClient() as client:
        fakes = [FakeAnthropic(), FakeAnthropic()]
        servers = []
        for i, fake in enumerate(fakes):
            upstream = await stack.enter_async_context(serve_app(fake))
            servers.append(await stack.enter_async_context(daari_server(make_config(
                tmp_path / f"d{i}", tiers={"L6": upstream_tier("anthropic", upstream, forward_client_key=True)},
                frontier={"enabled": True},
                cache={"l1": {"enabled": False}, "org": {"url": service.url, "token_env": "ORG_TOKEN_GATEWAY",
                                                        "timeout_s": 2.0}}))))
        one, two = servers

        async def ask_as(server: RunningServer, key: str) -> dict[str, Any]:
            response = await client.post(server.url + "/v1/messages", json=ask_body, headers={"x-api-key": key})
            assert response.status_code == 200, response.text
            meta: dict[str, Any] = response.json()["daari_meta"]
            return meta

        assert (await ask_as(one, KEY_A))["tier"] == "L6"
        assert len(await org_entries(redis, "k*", 1)) == 1
        assert (await ask_as(two, KEY_A))["tier"] == "L0-org" and len(fakes[1].requests) == 0
        assert (await ask_as(two, KEY_B))["tier"] == "L6" and len(fakes[1].requests) == 1
        assert fakes[1].requests[-1].headers["x-api-key"] == KEY_B
        stored = await trio.to_thread.run_sync(redis.cli, "--scan", "--pattern", "*")
        assert KEY_A not in stored and hashlib.sha256(KEY_A.encode()).hexdigest() not in stored


def test_daari_org_cache_serve_runs_as_its_own_process_and_logs_no_credential(tmp_path: Path,
                                                                              redis: RedisServer) -> None:
    port = free_port()
    config = tmp_path / "org-cache.yaml"
    config.write_text(f"port: {port}\ndata_dir: {tmp_path / 'org'}\nredis: {{url: '{redis.url}'}}\n"
                      f"tokens:\n  - {{name: team-a-box, sha256: {sha(TOKENS['team-a'])}, tenants: [team-a]}}\n")
    process = subprocess.Popen([sys.executable, "-m", "daari", "org-cache", "serve", "--config", str(config)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert httpx.post(base + CREDENTIALS_PATH, json={"tenant": "team-a"}).status_code == 401
        given = httpx.post(base + CREDENTIALS_PATH, json={"tenant": "team-a"},
                           headers={"authorization": f"Bearer {TOKENS['team-a']}"})
        assert given.status_code == 200
        password = given.json()["password"]
        assert redis.cli("SET", "t:team-a:probe", "1", user="daari-t-team-a", password=password) == "OK"
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "issued to team-a-box" in output
    assert password not in output and TOKENS["team-a"] not in output


async def test_sharing_is_opt_in_per_tenant_and_per_entry(tmp_path: Path, redis: RedisServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """team-a and team-b opted in, team-c did not. Only an answer marked shareable crosses, only between the two
    that opted in; team-c's Redis user cannot even read the shared entries, and no tenant can write them."""
    async with org_service(tmp_path, redis, sharing=("team-a", "team-b")) as service, \
            instances(tmp_path, service.url, ["team-a", "team-b", "team-c"], monkeypatch) as ((a, b, c), fakes), \
            httpx.AsyncClient() as client:
        shared = await client.post(a.url + "/v1/chat/completions", json=chat("what does git bisect do?"),
                                   headers={"x-daari-org-share": "true"})
        assert shared.status_code == 200 and content(shared.json()).endswith("[up0]")
        private = await ask(client, a.url, "what does git stash do?")  # not marked: stays team-a's
        assert content(private).endswith("[up0]")
        await org_entries(redis, "team-a", 2)
        with trio.fail_after(20):
            while not (await trio.to_thread.run_sync(redis.cli, "--scan", "--pattern", "s:l0:*")):
                await trio.sleep(0.05)
        assert "x-daari-org-share" not in fakes[0].requests[0].headers  # daari's header never goes upstream

        from_b = await ask(client, b.url, "what does git bisect do?")
        assert from_b["daari_meta"]["tier"] == "L0-org" and content(from_b) == content(shared.json())
        assert from_b["daari_meta"]["org_shared"] is True
        assert content(await ask(client, b.url, "what does git stash do?")).endswith("[up1]")
        from_c = await ask(client, c.url, "what does git bisect do?")
        assert content(from_c).endswith("[up2]"), "team-c did not opt in: it must not see shared entries"

        users = {team: (await credentials(client, service.url, team, TOKENS[team])).json() for team in TOKENS}
        shared_key = (await trio.to_thread.run_sync(redis.cli, "--scan", "--pattern", "s:l0:*")).splitlines()[0]
        assert "NOPERM" in redis.cli("GET", shared_key, user=users["team-c"]["username"],
                                     password=users["team-c"]["password"])
        assert "NOPERM" in redis.cli("SET", shared_key, "forged", user=users["team-b"]["username"],
                                     password=users["team-b"]["password"])
        refused = await client.post(service.url + "/v1/org/share", json={"tenant": "team-c", "key": "0" * 64},
                                    headers={"authorization": f"Bearer {TOKENS['team-c']}"})
        assert refused.status_code == 403


async def test_a_redis_that_restarted_without_its_acl_users_is_used_again(tmp_path: Path, redis: RedisServer,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A restarted Redis (no persistence) lost the tenants' users: the tenant link cannot log in again, so after
    RENEW_AFTER_S down it is set up afresh (the service re-creates the user), and the org cache works again."""
    monkeypatch.setattr("daari.org.client.RENEW_AFTER_S", 0.5)  # 10 s in production: the test need not wait that
    async with org_service(tmp_path, redis) as service, \
            instances(tmp_path, service.url, ["team-a", "team-a"], monkeypatch) as ((one, two), fakes), \
            httpx.AsyncClient() as client:
        await ask(client, one.url, "before the restart")
        await org_entries(redis, "team-a", 1)
        await trio.to_thread.run_sync(redis.stop)
        await trio.to_thread.run_sync(redis.start)
        assert await trio.to_thread.run_sync(redis.cli, "ACL", "USERS") == "default"  # the tenant user is gone
        n = 0
        with trio.fail_after(30):
            while not await org_entries_now(redis, "team-a"):  # one's writes resume once its link is renewed
                n += 1
                await ask(client, one.url, f"after the restart {n}")
                await trio.sleep(0.2)
        answer = await ask(client, two.url, f"after the restart {n}")
        assert answer["daari_meta"]["tier"] == "L0-org", answer["daari_meta"]
        assert content(answer).endswith("[up0]")
        # two never renewed its link: it reconnected as the same user, whose derived password the service set again


async def test_l1_org_serves_a_paraphrase_another_instance_of_the_team_stored_and_no_other_team(
        tmp_path: Path, redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """L1-org after the local L1 missed: the team's entries, searched by an index built from the tenant's stream
    (as its Redis user), with the local verifier; another team's instance never finds them."""
    async with AsyncExitStack() as stack, httpx.AsyncClient(timeout=60) as client:
        service = await stack.enter_async_context(org_service(tmp_path, redis))
        fakes = [Labeled(f"up{i}") for i in range(3)]
        servers = []
        for i, team in enumerate(["team-a", "team-a", "team-b"]):
            url = await stack.enter_async_context(serve_app(fakes[i]))
            monkeypatch.setenv(f"ORG_TOKEN_D{i}", TOKENS[team])
            config = make_config(tmp_path / f"d{i}", tiers={"L3": upstream_tier("openai", url + "/v1")},
                                 cache={"l1": {"enabled": True},
                                        "org": {"url": service.url, "team": team, "token_env": f"ORG_TOKEN_D{i}",
                                                "timeout_s": 2.0, "l1_similarity_threshold": 0.5}})
            servers.append(await stack.enter_async_context(daari_server(config)))
        one, two, other = servers
        for server in servers:
            tier = server.parts.shortcuts["L1"]
            assert isinstance(tier, SemanticTier)
            with trio.fail_after(120):
                await tier.status.started.wait()
        first = await ask(client, one.url, "How do I list Docker containers?")
        assert first["daari_meta"]["tier"] == "L3"
        with trio.fail_after(30):  # one's L1-org write reached two's L1-org index through the tenant's stream
            while await two.parts.table.address("l1_org").call(L1Count()) < 1:
                await trio.sleep(0.02)
        hit = await ask(client, two.url, "Show me the command to list docker containers")
        assert hit["daari_meta"]["tier"] == "L1-org" and content(hit) == content(first), hit["daari_meta"]
        assert hit["daari_meta"]["verdict"] == "accepted"  # the local verifier agreed
        assert hit["daari_meta"]["cache_hit"] is True and hit["daari_meta"]["cache"] == "hit"
        assert await other.parts.table.address("l1_org").call(L1Count()) == 0  # team-b's index never saw it
        missed = await ask(client, other.url, "Show me the command to list docker containers")
        assert content(missed).endswith("[up2]") and missed["daari_meta"]["tier"] == "L3"
        # not even a candidate to reject: team-a's entry is not there
        assert missed["daari_meta"]["l1_org"] == "miss" and "verdict" not in missed["daari_meta"]
        assert redis.cli("XLEN", "t:team-a:l1:log") == "1"  # one entry: the paraphrase was a hit, the miss is b's


def key_tenant_of(data_dir: Path, key: str) -> str:
    """The org tenant of a caller's key, as a daari with this data dir's partition secret names it."""
    tenant = key_tenant(cache_partition(load_secret(data_dir), {"authorization": f"Bearer {key}"}))
    assert tenant is not None
    return tenant


async def test_l1_org_for_key_tenants_holds_each_recent_tenants_index_and_never_crosses_tenants(
        tmp_path: Path, redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a team, each caller's key is its own tenant with its own L1-org index: key A's paraphrase is an
    L1-org hit on another daari; key B, with identical and near-identical prompts, never gets key A's entries. A
    tenant whose index is still loading is a miss at once; with cache.org.l1_key_tenants: 1 the least recent
    tenant's index is dropped when another is opened."""
    secret = load_secret(tmp_path / "d0" / "data")
    (private_dir(tmp_path / "d1" / "data") / SECRET_FILE).write_bytes(secret)
    tenant_a, tenant_b = (key_tenant_of(tmp_path / "d0" / "data", key) for key in (KEY_A, KEY_B))
    monkeypatch.setenv("ORG_TOKEN_GATEWAY", GATEWAY_TOKEN)
    async with AsyncExitStack() as stack, httpx.AsyncClient(timeout=60) as client:
        service = await stack.enter_async_context(org_service(tmp_path, redis))
        fakes = [Labeled(f"up{i}") for i in range(2)]
        servers = []
        for i, fake in enumerate(fakes):
            url = await stack.enter_async_context(serve_app(fake))
            config = make_config(tmp_path / f"d{i}", tiers={"L3": upstream_tier("openai", url + "/v1",
                                                                                forward_client_key=True)},
                                 cache={"l1": {"enabled": True},
                                        "org": {"url": service.url, "token_env": "ORG_TOKEN_GATEWAY", "timeout_s": 2.0,
                                                "l1_similarity_threshold": 0.5, "l1_key_tenants": 1}})
            servers.append(await stack.enter_async_context(daari_server(config)))
        one, two = servers
        for server in servers:
            tier = server.parts.shortcuts["L1"]
            assert isinstance(tier, SemanticTier)
            with trio.fail_after(120):
                await tier.status.started.wait()
        l1_org = two.parts.table.address("l1_org")

        async def ask_as(server: RunningServer, key: str, text: str) -> dict[str, Any]:
            response = await client.post(server.url + "/v1/chat/completions", json=chat(text),
                                         headers={"authorization": f"Bearer {key}"})
            assert response.status_code == 200, response.text
            body: dict[str, Any] = response.json()
            return body

        async def loaded(tenant: str) -> int:
            with trio.fail_after(30):
                while (count := await l1_org.call(TenantCount(tenant))) is None:
                    await trio.sleep(0.02)
            return count

        first = await ask_as(one, KEY_A, "How do I list Docker containers?")
        assert first["daari_meta"]["tier"] == "L3" and content(first).endswith("[up0]")
        with trio.fail_after(30):  # one's L1-org write, in key A's tenant
            while redis.cli("XLEN", f"t:{tenant_a}:l1:log") != "1":
                await trio.sleep(0.02)

        # two has never seen key A: its index opens on the first lookup, which does not wait for it.
        warm = await ask_as(two, KEY_A, "what is the capital of France?")
        assert warm["daari_meta"]["l1_org"] == "index_loading", warm["daari_meta"]
        assert await loaded(tenant_a) >= 1
        hit = await ask_as(two, KEY_A, "Show me the command to list docker containers")
        assert hit["daari_meta"]["tier"] == "L1-org" and content(hit) == content(first), hit["daari_meta"]
        assert hit["daari_meta"]["verdict"] == "accepted"

        # Key B's index opens; key A's, the least recent, is dropped (l1_key_tenants: 1).
        await ask_as(two, KEY_B, "what is the capital of Spain?")
        await loaded(tenant_b)
        assert await l1_org.call(TenantCount(tenant_a)) is None
        for text in ("How do I list Docker containers?", "how do I list docker containers?",
                     "Show me the command to list docker containers", "How do I list Docker containers"):
            answer = await ask_as(two, KEY_B, text)
            assert answer["daari_meta"]["tier"] not in ("L0-org", "L1-org"), answer["daari_meta"]
            assert content(answer).endswith("[up1]")
        page = (await client.get(two.url + "/metrics")).text
        assert 'daari_org_cache_lookups_total{level="L1-org",result="hit"} 1.0' in page
        assert 'daari_org_cache_lookups_total{level="L1-org",result="loading"}' in page
        assert 'daari_org_cache_l1_indexes_total{event="dropped"} 1.0' in page
        assert fakes[1].requests[-1].headers["authorization"] == f"Bearer {KEY_B}"
        stored = await trio.to_thread.run_sync(redis.cli, "--scan", "--pattern", f"t:{tenant_b}:l1:e:*")
        for key in stored.splitlines():  # key B's entries hold key B's prompts only
            assert "capital of France" not in redis.cli("HGET", key, "embed")


async def test_a_tier_override_looks_up_l0_org_like_l0_and_an_l0_override_misses_only_when_both_do(
        tmp_path: Path, redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    async with org_service(tmp_path, redis) as service, \
            instances(tmp_path, service.url, ["team-a", "team-a"], monkeypatch) as ((one, two), fakes), \
            httpx.AsyncClient() as client:

        async def post(server: RunningServer, text: str, override: str) -> httpx.Response:
            return await client.post(server.url + "/v1/chat/completions", json=chat(text),
                                     headers={"x-daari-tier-override": override})

        first = await ask(client, one.url, "what does git rebase do?")
        pinned = (await post(one, "what does git stash do?", "L3")).json()
        assert pinned["daari_meta"]["tier"] == "L3"
        await org_entries(redis, "team-a", 2)

        from_org = await post(two, "what does git rebase do?", "L0")  # two's own L0 is empty
        assert from_org.status_code == 200, from_org.text
        assert from_org.json()["daari_meta"]["tier"] == "L0-org" and content(from_org.json()) == content(first)
        missing = await post(two, "what does git bisect do?", "L0")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "l0_miss"
        again = (await post(two, "what does git stash do?", "L3")).json()  # the same override: the same key
        assert again["daari_meta"]["tier"] == "L0-org" and content(again) == content(pinned)
        assert (await post(two, "what does git stash do?", "L0")).status_code == 404  # L3's answer is kept apart
        assert upstream_calls(fakes) == 2 and len(fakes[1].requests) == 0
