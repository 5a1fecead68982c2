"""Starting L1: the EmbedderActor, the SemanticCacheActor and the VerifierActor, and the tier that asks them.

Called by serve.py when `cache.l1.enabled`. The embedding model loads in the background, so the server
listens at once; L1 declines (`daari_meta.l1: skipped_loading`) until the model is ready.
"""

from __future__ import annotations

from pathlib import Path

import trio

from actors import Health, RestartPolicy, open_mailbox, supervise
from actors.embedder import EmbedderActor, EmbedderStatus
from actors.semantic_cache import IndexStats, SemanticCacheActor
from actors.verifier import VerifierActor
from daari.pipeline.l1_tier import SemanticTier
from daari.pipeline.runtime import Runtime
from daari.pipeline.side_query import ask_tier
from daari.protocol.chat import Message


async def start_l1(nursery: trio.Nursery, rt: Runtime, health: Health, policy: RestartPolicy) -> SemanticTier:
    config = rt.config
    l1 = config.cache.l1
    size = config.actors.mailbox_size
    status, stats = EmbedderStatus(), IndexStats()
    embedder, embedder_inbox = open_mailbox("embedder", size)
    cache, cache_inbox = open_mailbox("l1", size)
    verifier, verifier_inbox = open_mailbox("verifier", size)
    tiers = config.configured_tiers()
    verify_tier = l1.verify_tier or (tiers[0] if tiers else None)
    # An answer L0 no longer serves for being too old is not served by L1 either.
    ttl = config.cache.l0.ttl_s
    max_age_s = min(l1.max_age_s, ttl) if ttl > 0 else l1.max_age_s
    if verify_tier not in tiers:  # not configured (or L6 with frontier off): model verdicts reject
        verify_tier = None

    async def ask_model(messages: list[Message]) -> str | None:
        if verify_tier is None:
            return None
        return await ask_tier(rt, verify_tier, messages, config.tiers[verify_tier].model or "daari-verifier",
                              max_tokens=3)

    await nursery.start(supervise, lambda: EmbedderActor(status, l1.embed_batch_size,
                                                         l1.embed_batch_wait_ms / 1000.0),
                        embedder_inbox, health, policy)
    await nursery.start(supervise, lambda: SemanticCacheActor(
        Path(config.data_dir), max_entries=l1.max_entries, max_age_s=max_age_s, trees=l1.index_trees,
        rebuild_after=l1.rebuild_after, stats=stats), cache_inbox, health, policy)
    await nursery.start(supervise, lambda: VerifierActor(l1.verify, ask_model), verifier_inbox, health, policy)
    tier = SemanticTier(l1, embedder, status, cache, verifier, rt.metrics)
    tier.index_stats = stats
    return tier
