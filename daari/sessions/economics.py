"""Prompt-cache economics: what a turn costs on a tier whose provider cache is warm or cold, and whether moving a
session off the tier that holds its cache saves more than rebuilding that cache costs (docs/routing.md,
"Session affinity"). Pure arithmetic on the price table; the token counts come from the usage upstreams report.

The estimate, written out:
- stay  = the turn at the home tier: its warm prefix at the cache-read price, the rest at the input price
          (the write price where the client marks the prompt for caching), the output at the output price;
- move  = the same turn at the planned tier, cold (a free local tier costs 0);
- saving of moving = stay - move;
- rebuild = what the home tier pays again for the prefix it holds once the session has left long enough for
          its cache to lapse: warm tokens x input price x (write multiplier - read multiplier).
The session stays unless saving > rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass

from daari.config import PricingConfig
from daari.pricing import price_for

PER_TOKEN = 1 / 1_000_000


@dataclass(frozen=True)
class Rates:
    """A tier's prices per million tokens, and its provider cache's read and write multipliers."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    read_multiplier: float = 0.1
    write_multiplier: float = 1.25

    @property
    def free(self) -> bool:
        return self.input_per_mtok == 0 and self.output_per_mtok == 0


FREE = Rates()


def rates_for(pricing: PricingConfig, tier: str, model: str | None = None) -> Rates:
    price = price_for(pricing, tier, model)
    if price is None:
        return FREE
    return Rates(price.input_per_mtok, price.output_per_mtok, price.cache_read_multiplier,
                 price.cache_write_multiplier)


def turn_cost(rates: Rates, prompt_tokens: int, warm_tokens: int, output_tokens: int, writes_cache: bool) -> float:
    """One turn's price: the warm part of the prompt read from the cache, the rest written (or plain input)."""
    warm = max(0, min(warm_tokens, prompt_tokens))
    cold = prompt_tokens - warm
    per_input = rates.input_per_mtok * PER_TOKEN
    cold_multiplier = rates.write_multiplier if writes_cache else 1.0
    return (warm * per_input * rates.read_multiplier + cold * per_input * cold_multiplier
            + output_tokens * rates.output_per_mtok * PER_TOKEN)


def rebuild_cost(home: Rates, warm_tokens: int) -> float:
    """Writing the home tier's prefix again instead of reading it."""
    premium = max(0.0, home.write_multiplier - home.read_multiplier)
    return max(0, warm_tokens) * home.input_per_mtok * PER_TOKEN * premium


def lost_cache_cost(rates: Rates, lost_tokens: int) -> float:
    """What a turn paid for prompt tokens another tier held warm: full input price instead of the read price."""
    return max(0, lost_tokens) * rates.input_per_mtok * PER_TOKEN * max(0.0, 1.0 - rates.read_multiplier)


@dataclass(frozen=True)
class MoveEstimate:
    stay_usd: float  # this turn at the home tier, its cache warm
    move_usd: float  # this turn at the planned tier, cold
    rebuild_usd: float  # the home tier's cache written again later

    @property
    def saving_usd(self) -> float:
        return self.stay_usd - self.move_usd

    @property
    def stay(self) -> bool:
        return self.saving_usd <= self.rebuild_usd

    def to_json(self) -> dict[str, float]:
        return {"stay_usd": round(self.stay_usd, 6), "move_usd": round(self.move_usd, 6),
                "saving_usd": round(self.saving_usd, 6), "rebuild_usd": round(self.rebuild_usd, 6)}


def weigh_move(home: Rates, target: Rates, prompt_tokens: int, warm_tokens: int, output_tokens: int,
               writes_cache: bool) -> MoveEstimate:
    """Should a session warm at `home` move to `target` for this turn? `MoveEstimate.stay` says."""
    stay = turn_cost(home, prompt_tokens, warm_tokens, output_tokens, writes_cache)
    move = turn_cost(target, prompt_tokens, 0, output_tokens, writes_cache)
    return MoveEstimate(stay, move, rebuild_cost(home, warm_tokens))
