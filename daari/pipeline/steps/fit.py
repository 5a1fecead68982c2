"""Tier-chain planners for what a tier can physically serve (execute step, before the first attempt):
- `ModelNames`: a tier that forwards the client's model name (no `model` of its own) gets only names it serves
  (its `models` globs, else what its upstream lists, Ollama's /api/tags; an upstream that lists nothing is not
  second-guessed). No tier left: 404 in the client's shape, naming what may be asked for (GET /v1/models).
- `ContextFit`: a tier whose context window the request does not fit (local/context_fit.py) is skipped, never
  given a cut prompt; the decision says why (`daari_meta.context`, attempts `skipped_context`). With no tier of
  the chain left, the configured tiers above it that fit are tried; none: 400 "prompt is too long" (the words
  Claude Code reacts to by compacting its conversation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase

from daari.config import TierConfig
from daari.errors import InvalidRequest, NotFound
from daari.local.context_fit import MIN_ANSWER, fits, prompt_need
from daari.pipeline.meta import Attempt
from daari.pipeline.steps.execute import Tiers
from daari.pipeline.turn import Turn
from daari.protocol.tokens import estimate_request_tokens
from daari.routing.agent_turn import needs_tool_calls
from daari.routing.plan import tier_rank


class ModelNames:
    def __init__(self, configs: Mapping[str, TierConfig], listed: Callable[[str], frozenset[str] | None],
                 known: Callable[[], list[str]]) -> None:
        self.configs = configs
        self.listed = listed  # tier -> names its upstream listed (None: it did not say)
        self.known = known  # every name a client may ask for (for the refusal's message)

    def serves(self, tier: str, name: str) -> bool:
        config = self.configs[tier]
        if config.model or config.executor == "embedded":
            return True  # the tier's own model answers, whatever the client named
        if config.models:
            return any(fnmatchcase(name, pattern) for pattern in config.models)
        listed = self.listed(tier)
        return listed is None or name in listed

    def __call__(self, turn: Turn, chain: list[str]) -> list[str]:
        name = turn.request.model
        kept = [t for t in chain if self.serves(t, name)]
        if len(kept) == len(chain):
            return chain
        for tier in chain:
            if tier not in kept:
                turn.meta.attempts.append(Attempt(tier, "skipped_model"))
        if kept:
            return kept
        turn.meta.error = "model_not_found"
        names = ", ".join(self.known()[:20])
        raise NotFound(f"model: {name!r} is not served by any tier that could answer this request; "
                       f"models: {names} (GET /v1/models), or map it in routing.models", param="model",
                       code="model_not_found")


class ContextFit:
    def __init__(self, tiers: Tiers, window: Callable[[str], int | None]) -> None:
        self.tiers = tiers
        self.window = window  # tier -> its context window in tokens (None: unknown)

    def __call__(self, turn: Turn, chain: list[str]) -> list[str]:
        if not chain:
            return chain
        estimate = turn.classification.tokens if turn.classification else estimate_request_tokens(turn.request)
        skipped = {t: w for t in chain if not fits(estimate, w := self.window(t))}
        if not skipped:
            return chain
        meta = turn.meta
        meta.details["context"] = {"estimate": estimate, "need": prompt_need(estimate) + MIN_ANSWER,
                                   "windows": skipped}
        for tier in skipped:
            meta.attempts.append(Attempt(tier, "skipped_context"))
        kept = [t for t in chain if t not in skipped]
        if kept:
            return kept
        if turn.controls.tier_override is None:
            tools = needs_tool_calls(turn.request)
            above = [t for t in self.tiers.configured if tier_rank(t) > tier_rank(chain[-1])
                     and fits(estimate, self.window(t)) and (not tools or self.tiers.tools_capable.get(t))]
            if above:
                return above
        largest = max((w for w in (self.window(t) for t in self.tiers.configured) if w is not None), default=0)
        meta.error = "context_length_exceeded"
        raise InvalidRequest(f"prompt is too long: about {prompt_need(estimate)} tokens > {largest} maximum "
                             "(no configured tier's context window fits this request; daari does not cut prompts)",
                             code="context_length_exceeded")
