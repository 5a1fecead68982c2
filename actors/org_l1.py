"""OrgL1Actor: L1-org's indexes, one per tenant (actors/l1_index.py, the same index the local L1 runs), each over the
tenant's own L1 entries in the org's Redis (`t:<tenant>:l1:`), reached as the tenant's Redis user.

With a team there is one tenant, whose index is opened at start. Without one, each caller's key is its own tenant:
the actor holds the indexes of the `capacity` tenants most recently asked about (cache.org.l1_key_tenants); the
least recent one is dropped (its memory with it) when another is opened. An index is opened on a tenant's first
lookup or write, read whole from the tenant's stream, then followed like the team's; a lookup while it loads (or
while the tenant's link is being set up) is answered None at once, never waited for: the request goes on as a
miss. Every message names its tenant, and the lookup goes to that tenant's index only.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio

from actors.l1_index import L1Index, Match
from actors.runtime import Actor, Call, handles
from actors.semantic_cache import L1Count, L1Lookup, L1Put, new_entry
from daari.cache.l1_redis import RedisL1
from daari.cache.redis_link import RedisLink
from daari.metrics import Metrics
from daari.tenant import tenant_prefix

log = logging.getLogger("daari.org")

LinkOf = Callable[[str], RedisLink | None]  # the tenant's link now (daari/org/client.py, OrgCache.link_now)
IndexOf = Callable[[RedisL1], L1Index]  # an index over a tenant's store, with the local L1's settings


@dataclass(frozen=True)
class TenantLookup(Call[list[Match] | None]):
    """`lookup` in `tenant`'s index; None: that index is not ready yet (loading, or no link yet)."""

    tenant: str
    lookup: L1Lookup


@dataclass(frozen=True)
class TenantPut(Call[int | None]):
    """Store an answer in `tenant`'s entries; None: its link is not ready, the answer is not stored."""

    tenant: str
    put: L1Put


@dataclass(frozen=True)
class TenantCount(Call[int | None]):
    """Entries in `tenant`'s index; None when the actor holds none for it, or it is still loading."""

    tenant: str


@dataclass
class TenantIndex:
    link: RedisLink  # the link it was built on: a tenant set up afresh has a new one, and the index is rebuilt
    index: L1Index
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class OrgL1Actor(Actor):
    name = "l1_org"

    def __init__(self, link_of: LinkOf, index_of: IndexOf, metrics: Metrics, *, capacity: int,
                 max_entries: int, max_age_s: float, team: str | None = None) -> None:
        self.link_of = link_of
        self.index_of = index_of
        self.metrics = metrics
        self.capacity = 1 if team is not None else max(0, capacity)
        self.max_entries = max_entries
        self.max_age_s = max_age_s
        self.team = team
        self._held: OrderedDict[str, TenantIndex] = OrderedDict()
        self._nursery: trio.Nursery | None = None

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self.team is not None:
                self._index(self.team)  # the one tenant: loading before the first request
            try:
                yield
            finally:
                self._nursery = None
                self._held.clear()
                nursery.cancel_scope.cancel()

    def _index(self, tenant: str) -> TenantIndex | None:
        """The tenant's index, opened (and the least recent one dropped) if the actor holds none on its current
        link; None when its link is not ready."""
        if self._nursery is None or self.capacity == 0 or (self.team is not None and tenant != self.team):
            return None
        link = self.link_of(tenant)
        if link is None:
            return None
        held = self._held.get(tenant)
        if held is not None and held.link is link:
            self._held.move_to_end(tenant)
            return held
        if held is not None:
            self._drop(tenant)
        held = self._held[tenant] = TenantIndex(link, self.index_of(RedisL1(
            link, tenant_prefix(tenant), max_entries=self.max_entries, max_age_s=self.max_age_s)))
        self.metrics.inc("org_cache_l1_indexes_total", event="opened")
        while len(self._held) > self.capacity:
            self._drop(next(iter(self._held)))
            self.metrics.inc("org_cache_l1_indexes_total", event="dropped")
        self._nursery.start_soon(self._run, held)
        return held

    def _drop(self, tenant: str) -> None:
        held = self._held.pop(tenant, None)
        if held is not None:
            held.scope.cancel()

    @staticmethod
    async def _run(held: TenantIndex) -> None:
        with held.scope:
            async with held.index.running():
                await trio.sleep_forever()

    @handles(TenantLookup, concurrent=True)
    async def lookup(self, request: TenantLookup) -> list[Match] | None:
        held = self._index(request.tenant)
        if held is None or not held.index.loaded.is_set():
            return None
        asked = request.lookup
        return await held.index.lookup(asked.vector, asked.context, asked.threshold, asked.limit)

    @handles(TenantPut)
    async def put(self, request: TenantPut) -> int | None:
        held = self._index(request.tenant)
        if held is None:
            return None
        return await held.index.put(new_entry(request.put))

    @handles(TenantCount)
    async def tenant_count(self, request: TenantCount) -> int | None:
        held = self._held.get(request.tenant)
        return len(held.index) if held is not None and held.index.loaded.is_set() else None

    @handles(L1Count)
    async def count(self, request: L1Count) -> int:
        """Entries in every index held."""
        return sum(len(held.index) for held in self._held.values())
