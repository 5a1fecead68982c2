"""Coding agents' call types and model names mapped to tiers (docs/routing.md, "Client call types").

Reads: the parsed request and its headers, the classification. Decides: `daari_meta.call_type` (routing/
client_calls.py) and, when `routing.models` matches the model name or `routing.client_calls` lists the call type,
the tier the request starts at (its `ceiling`), recorded in `daari_meta.mapped`. A tier override wins over both.
It runs after the Phase B classifier, so the mapping is the last word on where a request starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from fnmatch import fnmatchcase

from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.routing.client_calls import call_type


def mapped_tier(models: Mapping[str, str], model: str) -> str | None:
    """The tier `routing.models` maps a client model name to (fnmatch globs, first match wins)."""
    return next((tier for pattern, tier in models.items() if fnmatchcase(model, pattern)), None)


class ClientCallStep:
    name = "client_call"

    def __init__(self, calls: Mapping[str, str], models: Mapping[str, str]) -> None:
        self.calls = dict(calls)  # routing.client_calls: call type -> tier
        self.models = dict(models)  # routing.models: model glob -> tier

    async def __call__(self, turn: Turn) -> Answer | None:
        request, meta, classification = turn.request, turn.meta, turn.classification
        kind = call_type(request, turn.headers, classification.tokens if classification is not None else None)
        meta.call_type = kind
        if classification is None or turn.controls.tier_override is not None:
            return None
        by = "model"
        tier = mapped_tier(self.models, request.model)
        if tier is None and kind is not None:
            by, tier = "call_type", self.calls.get(kind)
        if tier is None:
            return None
        turn.classification = dataclasses.replace(classification, ceiling=tier)
        meta.ceiling = tier
        meta.details["mapped"] = {"by": by, "tier": tier}
        return None
