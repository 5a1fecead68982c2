"""The org cache's steps (docs/redis.md, "Org cache"): L0-org after a local L0 miss, L1-org's tier (after the local
L1), and the write of an answer this daari produced to the org cache, all in the request's tenant only.

L0-org reads: the request's L0 key (the local L0 step made it), its partition and `cache_on`. A hit answers with
tier "L0-org" (`daari_meta.tier`), and is copied into the local L0 so the next copy is a local hit. A tier override
is looked up like the local L0 looks it up (its key holds the override); `X-Daari-Tier-Override: L0` is refused
(404 `l0_miss`) only when L0-org misses too. L1-org, like L1, is skipped by every override (ShortcutStep).

The write reads what the local cache write read, and stores only what it stored (an answer holding a secret never
leaves the machine), in the background; with `X-Daari-Org-Share: true` it is also offered to the tenants that opted
in to sharing (the service copies it, if this tenant opted in too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from actors.embedder import EmbedderStatus
from actors.org_l1 import TenantLookup, TenantPut
from actors.runtime import Address
from actors.semantic_cache import L1Lookup, L1Put, Match
from daari.cache.l0_store import L0Entry
from daari.config import L1Config
from daari.metrics import Metrics
from daari.org.client import OrgCache
from daari.pipeline.cache_guard import CacheGuard
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.pipeline.step import Answer
from daari.pipeline.steps.cache_write import STORABLE_FINISH
from daari.pipeline.steps.l0 import override_missed
from daari.pipeline.steps.l1 import SemanticTier
from daari.pipeline.turn import Turn
from daari.protocol.chat import Completion

LEVEL = "L0-org"
L1_LEVEL = "L1-org"
# Why L1-org did not look, as org_cache_lookups_total{level="L1-org"} counts it (else "miss").
BYPASSES = {"index_loading": "loading", "skipped_loading": "loading", "unavailable": "unavailable"}
SHARE_HEADER = "x-daari-org-share"  # "true": the caller lets other tenants that opted in reuse this answer


class OrgL0Step:
    name = LEVEL

    def __init__(self, org: OrgCache, guard: CacheGuard) -> None:
        self.org = org
        self.guard = guard  # the local L0: an org hit is copied there

    async def __call__(self, turn: Turn) -> Answer | None:
        if not turn.cache_on or not turn.key:
            return None
        # Any tier override is looked up, as the local L0 looks it up: the override is part of the L0 key, so only
        # an answer to the same override matches. `L0` pins the cache: a miss here too is its 404.
        tenant = self.org.tenant(turn.partition)
        found = await self.org.get(tenant, turn.key) if tenant is not None else None
        if found is None:
            override_missed(turn)
            return None
        entry, shared = found
        meta = turn.meta
        if shared:
            meta.details["org_shared"] = True  # another tenant shared it (both opted in)
        meta.cache_hit, meta.cache = True, "hit"
        meta.task_type, meta.rule_id, meta.ceiling = entry.task_type, entry.rule_id, entry.ceiling
        meta.agent_turn = entry.agent_turn
        await self.guard.put(turn.key, _local_copy(entry), meta)
        completion = entry.completion
        return Answer(LEVEL, "cache", completion, turn.wire.replay(completion, turn.request.stream), entry.confidence)


class OrgWriteStep:
    """After the local cache write: the same entry, offered to the tenant's org cache."""

    name = "org_write"

    def __init__(self, org: OrgCache) -> None:
        self.org = org

    async def __call__(self, turn: Turn, answer: Answer) -> None:
        completion = answer.completion
        meta = turn.meta
        if not (answer.store and turn.cache_on and turn.key and completion.finish_reason in STORABLE_FINISH):
            return
        if "not_cached" in meta.details:  # the local write kept it out (it holds a secret)
            return
        tenant = self.org.tenant(turn.partition)
        if tenant is None:
            return
        share = turn.headers.get(SHARE_HEADER, "").strip().lower() in ("1", "true", "yes")
        self.org.put_soon(tenant, turn.key, share=share, entry=L0Entry(
            completion=completion, tier=answer.tier, agent_turn=meta.agent_turn,
            semantic_ok=not (meta.agent_turn or completion.tool_calls), confidence=answer.confidence,
            task_type=meta.task_type, rule_id=meta.rule_id, ceiling=meta.ceiling))


class TenantSemanticTier(SemanticTier):
    """The local L1's probe, bar and verifier, searching and storing in the request's tenant's L1-org index only
    (actors/org_l1.py): the tenant is named in every message, never a filter applied after a search."""

    name = L1_LEVEL
    asks_census = False  # a tenant's index is asked by its lookup only

    def __init__(self, tenant_of: Callable[[str], str | None], config: L1Config, embedder: Address,
                 status: EmbedderStatus, cache: Address, verifier: Address, metrics: Metrics,
                 memo_of: SemanticTier | None = None) -> None:
        super().__init__(config, embedder, status, cache, verifier, metrics, memo_of=memo_of)
        self.tenant_of = tenant_of

    async def _search(self, query: ShortcutQuery, lookup: L1Lookup) -> list[Match] | None:
        tenant = self.tenant_of(query.partition)
        if tenant is None:
            return []
        found: list[Match] | None = await self.cache.call(TenantLookup(tenant, lookup))
        return found

    def _store(self, query: ShortcutQuery, put: L1Put) -> bool:
        tenant = self.tenant_of(query.partition)
        return tenant is None or self.cache.tell(TenantPut(tenant, put))


class OrgSemanticTier:
    """L1-org: a semantic tier over the tenant's org entries, after the local L1 missed. The same embedder and
    verifier as the local L1 (a TenantSemanticTier asking the L1-org actor), and a bar that can only be higher than
    the local one (compose builds it with the larger threshold and no learned bars, which could lower it). It
    stores, like the local L1, the answers L0 stored. A tenant whose index is still loading is a miss at once
    (`daari_meta.l1_org: "index_loading"`)."""

    name = L1_LEVEL

    def __init__(self, inner: TenantSemanticTier, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics
        self.serves_agent_turns = inner.serves_agent_turns

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        if not query.l0_key or self.inner.tenant_of(query.partition) is None:
            return None  # the cache is off for the request, or it has no tenant (no credential): no org cache
        result = await self.inner.answer(query)
        if result is not None and result.answered:
            self.metrics.inc("org_cache_lookups_total", level=L1_LEVEL, result="hit")
            return replace(result, tier=L1_LEVEL)
        reason = result.details.get("l1") if result is not None else None
        self.metrics.inc("org_cache_lookups_total", level=L1_LEVEL, result=BYPASSES.get(str(reason), "miss"))
        if result is None:
            return None
        # What it found is nested: the local L1's own report (similarity, verdict) stays as it was; no draft.
        details = dict(result.details)
        return ShortcutResult(L1_LEVEL, None, details={"l1_org": reason if list(details) == ["l1"] else details})

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        await self.inner.remember(query, completion, tier)


def _local_copy(entry: L0Entry) -> L0Entry:
    """A copy for the local L0 (whose writer may set fields): it keeps the answer's age, so it expires locally when
    it would have in the org cache with the same TTL."""
    return replace(entry)
