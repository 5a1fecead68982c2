"""`daari org-cache serve`: checks instance tokens, hands each instance a Redis user confined to one tenant, and
brokers opt-in sharing between tenants.

The only part of the org cache Redis cannot do itself. It holds the Redis admin credential; an instance presents its
token and a tenant, and gets back that tenant's ACL user (created or reset with ACL SETUSER, limited to
`~t:<tenant>:*`) and a password derived from the service's secret. The instance then talks to Redis directly: the
service is not on the request path, and Redis, not daari, keeps each tenant to its own keys. Sharing: for tenants
that opted in (`sharing`), the service copies an entry an instance marks shareable to `s:`, which only those
tenants' users may read and only the service may write. No prompt or answer
ever passes through here, and the log names tokens and tenants only, never a credential.
"""

from __future__ import annotations

import hmac
import json
import logging
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve

from daari.cache.redis_link import LinkSettings, RedisLink
from daari.cache.store import StoreUnavailable
from daari.datadir import load_secret
from daari.errors import DaariError, Forbidden, InvalidRequest, NotFound, PayloadTooLarge, Unauthorized
from daari.metrics import Metrics
from daari.org.api import CREDENTIALS_PATH, SHARE_PATH
from daari.org_service.config import OrgServiceConfig, OrgToken
from daari.server.asgi_io import answer_lifespan
from daari.server.guard import LOOPBACK_HOSTS, WILDCARD_BINDS, GuardPolicy, check_host, check_origin, host_name
from daari.tenant import (
    L0_KEY,
    SHARED_PREFIX,
    acl_rules,
    acl_username,
    tenant_password,
    tenant_prefix,
    token_digest,
    valid_tenant,
)

log = logging.getLogger("daari.org")

MAX_BODY = 4096

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Unavailable(DaariError):
    status = 503
    code = "redis_unavailable"


@dataclass(frozen=True)
class Credentials:
    tenant: str
    username: str
    password: str
    prefix: str
    url: str
    shared_prefix: str | None = None  # the tenant opted in to sharing: where the shared entries are (read-only)

    def to_json(self) -> dict[str, str | None]:
        return {"tenant": self.tenant, "username": self.username, "password": self.password, "prefix": self.prefix,
                "url": self.url, "shared_prefix": self.shared_prefix}


def guard_policy(config: OrgServiceConfig) -> GuardPolicy:
    """daari's own Host/Origin rules: loopback, the bind address and `allowed_hosts`; no browser origin."""
    hosts = {*LOOPBACK_HOSTS, *(host_name(h) for h in config.allowed_hosts)}
    if config.host not in WILDCARD_BINDS:
        hosts.add(host_name(config.host))
    return GuardPolicy(frozenset(hosts), frozenset())


def bearer_token(headers: Mapping[str, str]) -> str | None:
    scheme, _, credential = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and credential.strip():
        return credential.strip()
    return headers.get("x-daari-token", "").strip() or None


def token_holder(tokens: list[OrgToken], token: str | None) -> OrgToken:
    """The configured token `token` is (compared by digest, in constant time), or Unauthorized."""
    if token is None:
        raise Unauthorized("the org cache needs an instance token: send it as Authorization: Bearer")
    digest = token_digest(token).encode()
    for holder in tokens:
        if hmac.compare_digest(holder.sha256.encode(), digest):
            return holder
    raise Unauthorized("this token is not one of the org cache's")


class OrgService:
    """The service's ASGI app."""

    def __init__(self, config: OrgServiceConfig, link: RedisLink, secret: bytes) -> None:
        self.config = config
        self.link = link
        self.secret = secret
        self.policy = guard_policy(config)
        self.url = config.redis_url_for_instances()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            check_host(self.policy, headers)
            check_origin(self.policy, headers)
            status, body = await self._route(scope["method"], scope["path"], headers, receive)
        except DaariError as err:
            status, body = err.status, {"error": {"message": err.message, "code": err.code}}
        await _respond(send, status, body, {"www-authenticate": "Bearer"} if status == 401 else {})

    async def _route(self, method: str, path: str, headers: Mapping[str, str], receive: Receive
                     ) -> tuple[int, dict[str, Any]]:
        if path == "/healthz" and method == "GET":
            return 200, {"status": "ok", "redis": self.link.health()}
        if path not in (CREDENTIALS_PATH, SHARE_PATH) or method != "POST":
            raise NotFound(f"no route {method} {path}")
        holder = token_holder(self.config.tokens, bearer_token(headers))
        request = await _json_body(receive)
        tenant = request.get("tenant")
        if not isinstance(tenant, str) or not valid_tenant(tenant):
            raise InvalidRequest("tenant: expected 1-64 of a-z 0-9 _ -", param="tenant")
        if not holder.allows(tenant):
            raise Forbidden(f"token {holder.name!r} may not use tenant {tenant!r}")
        if path == SHARE_PATH:
            return 200, {"shared": await self.share(tenant, request.get("key"))}
        credentials = await self.credentials(tenant)
        log.info("org cache: Redis user for tenant %s issued to %s", tenant, holder.name)
        return 200, credentials.to_json()

    async def share(self, tenant: str, key: object) -> bool:
        """Copy the tenant's L0 entry `key` to the shared entries (its expiry with it); False when it is not there
        or an entry for that key is shared already (the first one stays). Only for tenants that opted in."""
        if tenant not in self.config.sharing:
            raise Forbidden(f"tenant {tenant!r} has not opted in to sharing (the service's `sharing`)")
        if not isinstance(key, str) or not L0_KEY.fullmatch(key):
            raise InvalidRequest("key: expected an L0 key (64 hex digits)", param="key")
        source, target = f"{tenant_prefix(tenant)}l0:{key}", f"{SHARED_PREFIX}l0:{key}"
        try:
            copied = await self.link.run(lambda client: client.copy(source, target))
        except StoreUnavailable as exc:
            raise Unavailable(str(exc)) from None
        return bool(copied)

    async def credentials(self, tenant: str) -> Credentials:
        """The tenant's ACL user, (re)set on every call: a Redis that restarted without its ACL gets it back."""
        username, password = acl_username(tenant), tenant_password(self.secret, tenant)
        shared = tenant in self.config.sharing
        rules = acl_rules(tenant, password, shared=shared)
        try:
            await self.link.run(lambda client: client.acl_setuser(username, *rules))
        except StoreUnavailable as exc:
            raise Unavailable(str(exc)) from None
        return Credentials(tenant, username, password, tenant_prefix(tenant), self.url,
                           SHARED_PREFIX if shared else None)


async def _json_body(receive: Receive) -> dict[str, Any]:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise PayloadTooLarge(f"the request body is over {MAX_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    try:
        data = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        raise InvalidRequest("the request body is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return data


async def _respond(send: Send, status: int, body: dict[str, Any], extra: Mapping[str, str]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
               (b"cache-control", b"no-store"), *((k.encode(), v.encode()) for k, v in extra.items())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


@dataclass
class RunningService:
    url: str
    service: OrgService
    shutdown: trio.Event


async def run_org_service(config: OrgServiceConfig, *, handle_signals: bool = False,
                          task_status: trio.TaskStatus[RunningService] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until cancelled (or, with `handle_signals`, SIGINT or SIGTERM: then in-flight requests finish)."""
    secret = await trio.to_thread.run_sync(load_secret, Path(config.data_dir))
    link = RedisLink(LinkSettings.from_config(config.redis), Metrics(), "org-admin")
    shutdown = trio.Event()
    async with link.running():
        service = OrgService(config, link, secret)
        hc = HypercornConfig()
        hc.bind = [f"{config.host}:{config.port}"]
        hc.accesslog = None  # the access log would show tenants per request; the service logs what it issues
        hc.errorlog = logging.getLogger("hypercorn.error")
        hc.include_server_header = False
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(lambda task_status: hypercorn_serve(
                service, hc, shutdown_trigger=shutdown.wait, task_status=task_status))  # type: ignore[arg-type]
            log.info("daari org cache listening on %s; Redis %s; %d instance token(s); sharing: %s", binds[0],
                     link.settings.shown, len(config.tokens), ", ".join(config.sharing) or "off")
            if not config.tokens:
                log.warning("no instance token is configured (tokens:): every instance will be refused")
            if handle_signals:
                nursery.start_soon(_stop_on_signal, shutdown)
            task_status.started(RunningService(binds[0], service, shutdown))
            await shutdown.wait()
            nursery.cancel_scope.deadline = trio.current_time() + 5.0  # hypercorn's own grace, bounded


async def _stop_on_signal(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            log.info("daari org cache stopping")
            shutdown.set()
            return
