"""The org cache's steps (docs/redis.md, "Org cache"): L0-org after a local L0 miss, and the write of an answer
this daari produced to the org cache, both in the request's tenant only.

L0-org reads: the request's L0 key (the local L0 step made it), its partition and `cache_on`. A hit answers with
tier "L0-org" (`daari_meta.tier`), and is copied into the local L0 so the next copy is a local hit. The write reads
what the local cache write read, and stores only what it stored (an answer holding a secret never leaves the
machine), in the background; with `X-Daari-Org-Share: true` it is also offered to the tenants that opted in to
sharing (the service copies it, if this tenant opted in too).
"""

from __future__ import annotations

from dataclasses import replace

from daari.cache.l0_store import L0Entry
from daari.metrics import Metrics
from daari.org.client import OrgCache
from daari.pipeline.cache_guard import CacheGuard
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.pipeline.step import Answer
from daari.pipeline.steps.cache_write import STORABLE_FINISH
from daari.pipeline.steps.l1 import SemanticTier
from daari.pipeline.turn import Turn
from daari.protocol.chat import Completion

LEVEL = "L0-org"
L1_LEVEL = "L1-org"
SHARE_HEADER = "x-daari-org-share"  # "true": the caller lets other tenants that opted in reuse this answer


class OrgL0Step:
    name = LEVEL

    def __init__(self, org: OrgCache, guard: CacheGuard) -> None:
        self.org = org
        self.guard = guard  # the local L0: an org hit is copied there

    async def __call__(self, turn: Turn) -> Answer | None:
        if not turn.cache_on or not turn.key or turn.controls.tier_override is not None:
            return None
        tenant = self.org.tenant(turn.partition)
        if tenant is None:
            return None
        found = await self.org.get(tenant, turn.key)
        if found is None:
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


class OrgSemanticTier:
    """L1-org: a semantic tier over the team's org entries, after the local L1 missed. The same embedder and
    verifier as the local L1 (a SemanticTier of its own, on the L1-org actor), and a bar that can only be higher than
    the local one (compose builds it with the larger threshold and no learned bars, which could lower it). It
    stores, like the local L1, the answers L0 stored."""

    name = L1_LEVEL

    def __init__(self, inner: SemanticTier, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics
        self.serves_agent_turns = inner.serves_agent_turns

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        result = await self.inner.answer(query)
        if result is not None and result.answered:
            self.metrics.inc("org_cache_lookups_total", level=L1_LEVEL, result="hit")
            return replace(result, tier=L1_LEVEL)
        if query.l0_key:  # it looked (with the cache off for the request, neither L1 reads)
            self.metrics.inc("org_cache_lookups_total", level=L1_LEVEL, result="miss")
        # What it found is nested: the local L1's own report (similarity, verdict) stays as it was; no draft.
        return None if result is None else ShortcutResult(L1_LEVEL, None, details={"l1_org": dict(result.details)})

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        await self.inner.remember(query, completion, tier)


def _local_copy(entry: L0Entry) -> L0Entry:
    """A copy for the local L0 (whose writer may set fields): it keeps the answer's age, so it expires locally when
    it would have in the org cache with the same TTL."""
    return replace(entry)
