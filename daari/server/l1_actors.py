"""Wiring L1: the tier that asks the EmbedderActor, the SemanticCacheActor and the VerifierActor.

The actors themselves are rows of actors/table.py (when `cache.l1.enabled`). The embedding model loads in
the background, so the server listens at once; L1 declines (`daari_meta.l1: skipped_loading`) until the
model is ready.
"""

from __future__ import annotations

from actors.runtime import ActorTable
from actors.table import Shared
from actors.verifier import AskModel
from daari.pipeline.l1_tier import SemanticTier
from daari.pipeline.runtime import Runtime
from daari.pipeline.side_query import ask_tier
from daari.protocol.chat import Message


def model_asker(rt: Runtime) -> AskModel:
    """How the verifier asks a model: the configured verify tier, else the first tier; none, it rejects."""
    config = rt.config
    l1 = config.cache.l1
    tiers = config.configured_tiers()
    verify_tier = l1.verify_tier or (tiers[0] if tiers else None)
    if verify_tier not in tiers:  # not configured (or L6 with frontier off): model verdicts reject
        verify_tier = None

    async def ask_model(messages: list[Message]) -> str | None:
        if verify_tier is None:
            return None
        return await ask_tier(rt, verify_tier, messages, config.tiers[verify_tier].model or "daari-verifier",
                              max_tokens=3)

    return ask_model


def l1_tier(rt: Runtime, table: ActorTable, shared: Shared) -> SemanticTier:
    tier = SemanticTier(rt.config.cache.l1, table.address("embedder"), shared.embedder_status,
                        table.address("l1"), table.address("verifier"), rt.metrics)
    tier.index_stats = shared.index_stats
    return tier
