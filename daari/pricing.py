"""Estimated cost of an answer from the price table (`pricing:` in daari.yaml), and the same answer at L6.

The saving daari reports is the difference: what the request would have cost had every request gone to
the frontier tier, minus what the tier that answered costs. Local tiers, caches, rules and tools cost 0
unless priced in the config.
"""

from __future__ import annotations

from daari.config import PriceConfig, PricingConfig
from daari.protocol.chat import Usage

FRONTIER = "L6"


def price_for(pricing: PricingConfig, tier: str | None, model: str | None) -> PriceConfig | None:
    """The model's own price if listed (answers at any tier), else the tier's; None: free."""
    if model is not None and model in pricing.models:
        return pricing.models[model]
    return pricing.tiers.get(tier) if tier is not None else None


def estimate_cost(pricing: PricingConfig, tier: str | None, model: str | None, prompt_tokens: int,
                  completion_tokens: int) -> float:
    price = price_for(pricing, tier, model)
    if price is None:
        return 0.0
    return (prompt_tokens * price.input_per_mtok + completion_tokens * price.output_per_mtok) / 1_000_000


def frontier_cost(pricing: PricingConfig, prompt_tokens: int, completion_tokens: int) -> float:
    """The same request answered at L6 (at L6's tier price: the model L6 would use is not known here)."""
    return estimate_cost(pricing, FRONTIER, None, prompt_tokens, completion_tokens)


def answer_costs(pricing: PricingConfig, tier: str | None, model: str | None, prompt_tokens: int,
                 completion_tokens: int) -> tuple[float, float]:
    """`estimate_cost` and `frontier_cost` of one answer (both are priced for every decision)."""
    if not prompt_tokens and not completion_tokens:  # a refusal, a rule's or tool's answer: nothing to price
        return 0.0, 0.0
    return (estimate_cost(pricing, tier, model, prompt_tokens, completion_tokens),
            frontier_cost(pricing, prompt_tokens, completion_tokens))


PriceKey = tuple[str, str | None, int, int]  # tier, model, prompt tokens, completion tokens


class AnswerCosts:
    """`answer_costs` of recent (tier, model, tokens), remembered: a decision handler prices every request, and
    most repeat a few kinds (every L0 hit of one answer costs the same)."""

    def __init__(self, pricing: PricingConfig, remembered: int = 1024) -> None:
        self.pricing = pricing
        self.remembered = remembered
        self._costs: dict[PriceKey, tuple[float, float]] = {}

    def __call__(self, key: PriceKey) -> tuple[float, float]:
        costs = self._costs.get(key)
        if costs is None:
            if len(self._costs) >= self.remembered:
                self._costs.clear()
            costs = self._costs[key] = answer_costs(self.pricing, *key)
        return costs


def usage_cost(pricing: PricingConfig, tier: str | None, model: str | None, usage: Usage) -> float:
    """What an answer cost by the usage its upstream reported: prompt tokens read from the provider's cache at the
    read multiplier, those written to it at the write multiplier, the rest at the input price; output (reasoning
    included, a part of it) at the output price. The budget counts this; the decision log's cost_usd is the
    simpler `estimate_cost`."""
    price = price_for(pricing, tier, model)
    if price is None:
        return 0.0
    fresh = max(0, usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens)
    prompt = (fresh + usage.cached_tokens * price.cache_read_multiplier
              + usage.cache_write_tokens * price.cache_write_multiplier) * price.input_per_mtok
    return (prompt + usage.completion_tokens * price.output_per_mtok) / 1_000_000
