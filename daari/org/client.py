"""A daari instance's side of the org cache: each tenant's Redis user (asked of `daari org-cache serve`), its link,
and L0-org lookups and writes through the ordinary Redis L0 store under the tenant's prefix `t:<tenant>:`. A tenant's
link also carries its L1-org index (actors/org_l1.py, through `link_now`); the team's link (`team_link`) is made
before the service answers and kept across renewals.

Nothing here can widen a tenant: every key is built under the tenant's prefix, and the link authenticates as the
tenant's ACL user, which Redis confines to that prefix (NOPERM on any other key). The org cache is best effort: a
service that refuses or does not answer, a Redis that is down or slow, is a miss within `timeout_s`, counted, and
the request goes on as if there were no org cache. Set-up runs in the background, so a request waits at most
`timeout_s` for a tenant's first link.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import trio

from daari.cache.l0_redis import RedisL0
from daari.cache.l0_store import L0Entry
from daari.cache.redis_link import LinkSettings, RedisLink
from daari.cache.store import StoreUnavailable
from daari.config import OrgCacheConfig, check_redis_url
from daari.errors import ConfigError, StartupError
from daari.metrics import Metrics
from daari.org.api import CREDENTIALS_PATH, SHARE_PATH
from daari.redact import redact_url
from daari.tenant import SHARED_PREFIX, key_tenant, tenant_prefix, valid_tenant

log = logging.getLogger("daari.org")

RETRY_AFTER_S = 5.0  # a tenant whose set-up failed is asked for again after this long
RENEW_AFTER_S = 10.0  # a tenant link down this long is set up afresh (a restarted Redis lost its ACL users)
MAX_TENANTS = 64  # links held at once; the least recently used goes first (key tenants: one per caller's key)
MAX_PENDING_PUTS = 256
SERVICE_TIMEOUT_S = 5.0
UNSET_URL = "redis://org-cache-service-not-asked-yet/0"  # the team link's address until the service names one


@dataclass(frozen=True)
class OrgSettings:
    url: str
    token: str
    team: str | None
    tls_ca_file: str | None
    timeout_s: float

    @classmethod
    def from_config(cls, config: OrgCacheConfig, *, key_tenants: bool,
                    environ: Mapping[str, str] | None = None) -> OrgSettings:
        """`key_tenants`: a tier forwards client keys (each caller is its own tenant when no team is set)."""
        env = os.environ if environ is None else environ
        assert config.url is not None
        token = env.get(config.token_env, "").strip()
        if not token:
            raise StartupError(f"cache.org.url is set but {config.token_env} (cache.org.token_env) is empty: the org "
                               "cache needs this daari's token")
        if config.team is None and not key_tenants:
            raise StartupError("cache.org needs a tenant: set cache.org.team, or forward client keys on a tier "
                               "(each caller's API key is then its tenant)")
        return cls(config.url.rstrip("/"), token, config.team, config.tls_ca_file, config.timeout_s)


@dataclass
class TenantLink:
    """One tenant's link and store, or why there is none yet."""

    done: trio.Event = field(default_factory=trio.Event)
    store: RedisL0 | None = None
    shared: RedisL0 | None = None  # the tenant opted in to sharing: the shared entries, read with its own user
    link: RedisLink | None = None
    failed_at: float | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    down_since: float | None = None


class OrgCache:
    def __init__(self, settings: OrgSettings, metrics: Metrics, ttl_s: float = 0.0) -> None:
        self.settings = settings
        self.metrics = metrics
        self.ttl_s = ttl_s
        self._tenants: OrderedDict[str, TenantLink] = OrderedDict()
        self._nursery: trio.Nursery | None = None
        self._http: httpx.AsyncClient | None = None
        self._puts_in, self._puts_out = trio.open_memory_channel[tuple[str, str, L0Entry, bool]](MAX_PENDING_PUTS)
        self.last_error: str | None = None
        # With a team, its link is made now (its address and user come from the service later): the L1-org store
        # and its actor are built on it before the service has answered, and keep it across renewals.
        self.team_link = (RedisLink(LinkSettings(UNSET_URL, timeout_s=settings.timeout_s), metrics, "org")
                          if settings.team is not None else None)

    def tenant(self, partition: str) -> str | None:
        """The request's tenant: the configured team, else its caller's key (None: no credential, no org cache)."""
        return self.settings.team if self.settings.team is not None else key_tenant(partition)

    def health(self) -> dict[str, Any]:
        links = [t.link for t in self._tenants.values() if t.link is not None]
        return {"url": redact_url(self.settings.url), "tenants": len(links),
                "up": sum(1 for link in links if link.up), "last_error": self.last_error}

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=SERVICE_TIMEOUT_S) as http, trio.open_nursery() as nursery:
            self._http, self._nursery = http, nursery
            nursery.start_soon(self._writer)
            if self.settings.team is not None:
                self._set_up_soon(self.settings.team)  # the one tenant: ready before the first request if it can be
            try:
                yield
            finally:
                self._nursery = None
                self._tenants.clear()  # their links close with the nursery; a restart sets them up again
                nursery.cancel_scope.cancel()

    async def get(self, tenant: str, key: str) -> tuple[L0Entry, bool] | None:
        """The tenant's L0 entry for `key`, else (the tenant opted in to sharing) a shared one, with whether it was
        shared; None on a miss and whenever the org cache cannot answer in time."""
        held = await self._held(tenant)
        result, found = "unavailable", None
        if held is not None and held.store is not None:
            try:
                entry = await held.store.get(key)
                result, found = ("hit", (entry, False)) if entry is not None else ("miss", None)
                if entry is None and held.shared is not None:
                    shared = await held.shared.get(key)
                    if shared is not None:
                        result, found = "shared_hit", (shared, True)
            except StoreUnavailable:
                result = "unavailable"
        self.metrics.inc("org_cache_lookups_total", level="L0-org", result=result)
        return found

    def link_now(self, tenant: str) -> RedisLink | None:
        """The tenant's link as it is now, without waiting (L1-org builds a tenant's index on it); None while it is
        being set up (this starts it) or could not be. The team's link is always the same object (renewals keep it);
        a key tenant's is new after each set-up, so an index built on an older one is stale."""
        if tenant == self.settings.team and self.team_link is not None:
            return self.team_link
        held = self._tenants.get(tenant)
        if held is not None and self._stale(held, time.monotonic()):
            self._forget(tenant)
            held = None
        if held is None:
            self._set_up_soon(tenant)
            return None
        self._tenants.move_to_end(tenant)
        return held.link if held.store is not None else None

    def put_soon(self, tenant: str, key: str, entry: L0Entry, *, share: bool = False) -> None:
        """Store `entry` in the background (the answer is not held up by the org's Redis); dropped when too many
        are pending. `share`: the caller marked it shareable; shared only if its tenant opted in."""
        try:
            self._puts_in.send_nowait((tenant, key, entry, share))
        except trio.WouldBlock:
            self.metrics.inc("org_cache_writes_total", result="dropped")

    async def _writer(self) -> None:
        async for tenant, key, entry, share in self._puts_out:
            held = await self._held(tenant)
            if held is None or held.store is None:
                self.metrics.inc("org_cache_writes_total", result="unavailable")
                continue
            try:
                kept = await held.store.write([(key, entry)], {})
            except StoreUnavailable:
                self.metrics.inc("org_cache_writes_total", result="unavailable")
                continue
            self.metrics.inc("org_cache_writes_total", result="kept" if kept else "stored")
            if share:
                await self._share(tenant, key, opted_in=held.shared is not None)

    async def _share(self, tenant: str, key: str, *, opted_in: bool) -> None:
        """Ask the service to copy the entry to the shared ones (only it may write there)."""
        if not opted_in:
            self.metrics.inc("org_cache_shares_total", result="not_opted_in")
            return
        assert self._http is not None
        try:
            response = await self._http.post(self.settings.url + SHARE_PATH, json={"tenant": tenant, "key": key},
                                             headers={"authorization": f"Bearer {self.settings.token}"})
            result = ("shared" if response.json().get("shared") else "exists") if response.status_code == 200 \
                else "refused"
        except (OSError, httpx.HTTPError, ValueError, AttributeError):
            result = "failed"
        self.metrics.inc("org_cache_shares_total", result=result)

    async def _held(self, tenant: str) -> TenantLink | None:
        held = self._tenants.get(tenant)
        now = time.monotonic()
        if held is not None and self._stale(held, now):
            self._forget(tenant)
            held = None
        if held is None:
            held = self._set_up_soon(tenant)
            if held is None:
                return None
        self._tenants.move_to_end(tenant)
        with trio.move_on_after(self.settings.timeout_s):
            await held.done.wait()
        return held if held.store is not None else None

    def _stale(self, held: TenantLink, now: float) -> bool:
        if held.failed_at is not None:
            return now - held.failed_at >= RETRY_AFTER_S
        link = held.link
        if link is None or link.up:
            held.down_since = None
            return False
        if held.down_since is None:
            held.down_since = now
        return now - held.down_since >= RENEW_AFTER_S

    def _set_up_soon(self, tenant: str) -> TenantLink | None:
        if self._nursery is None or not valid_tenant(tenant):
            return None
        held = self._tenants[tenant] = TenantLink()
        while len(self._tenants) > MAX_TENANTS:
            self._forget(next(iter(self._tenants)))
        self._nursery.start_soon(self._hold, tenant, held)
        return held

    def _forget(self, tenant: str) -> None:
        held = self._tenants.pop(tenant, None)
        if held is not None:
            held.scope.cancel()

    async def _hold(self, tenant: str, held: TenantLink) -> None:
        """Ask the service for the tenant's Redis user, then keep its link open until it is forgotten."""
        with held.scope:
            try:
                settings = await self._credentials(tenant)
            except (OSError, httpx.HTTPError, ConfigError, ValueError, KeyError, TypeError) as exc:
                self.metrics.inc("org_cache_setups_total", result="failed")
                self._setup_failed(held, f"the org cache service did not answer: {type(exc).__name__}")
                return
            if isinstance(settings, str):
                self.metrics.inc("org_cache_setups_total", result="refused")
                self._setup_failed(held, settings)
                return
            link_settings, prefix, shared_prefix = settings
            link = self.team_link if tenant == self.settings.team and self.team_link is not None else \
                RedisLink(link_settings, self.metrics, "org")
            link.settings = link_settings
            self.metrics.inc("org_cache_setups_total", result="ok")
            async with link.running():
                held.link, held.store = link, RedisL0(link, prefix, self.ttl_s)
                held.shared = RedisL0(link, shared_prefix, self.ttl_s) if shared_prefix is not None else None
                held.done.set()
                await trio.sleep_forever()
        held.done.set()

    def _setup_failed(self, held: TenantLink, reason: str) -> None:
        if reason != self.last_error:
            log.warning("org cache: no Redis user for a tenant: %s; its requests skip the org cache", reason)
        self.last_error = reason
        held.failed_at = time.monotonic()
        held.done.set()

    async def _credentials(self, tenant: str) -> tuple[LinkSettings, str, str | None] | str:
        """How to reach Redis as the tenant's user, its key prefix and shared prefix, or why the service refused."""
        assert self._http is not None
        response = await self._http.post(self.settings.url + CREDENTIALS_PATH, json={"tenant": tenant},
                                         headers={"authorization": f"Bearer {self.settings.token}"})
        if response.status_code != 200:
            return f"the org cache service answered {response.status_code}"
        body = response.json()
        url, prefix = str(body["url"]), str(body["prefix"])
        check_redis_url(url, "the org cache service's Redis URL")
        if prefix != tenant_prefix(tenant):
            return "the org cache service named another tenant's prefix"
        shared_prefix = body.get("shared_prefix")
        if shared_prefix is not None and shared_prefix != SHARED_PREFIX:
            return "the org cache service named an unknown shared prefix"
        settings = LinkSettings(url, str(body["username"]), str(body["password"]), self.settings.tls_ca_file,
                                self.settings.timeout_s)
        return settings, prefix, shared_prefix
