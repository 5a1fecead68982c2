"""Rates from few samples: the Wilson score interval (95% by default), never a bare ratio.

20 samples with 0 disagreements is not "0%": its 95% interval reaches about 16%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Rate:
    """`hits` of `samples`, its point estimate and Wilson interval (0..1 each; (0, 1) with no samples)."""

    samples: int
    hits: int
    rate: float
    low: float
    high: float

    def to_json(self) -> dict[str, object]:
        return {"samples": self.samples, "disagreements": self.hits, "rate": round(self.rate, 4),
                "interval": [round(self.low, 4), round(self.high, 4)]}


def wilson(hits: int, samples: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `hits` successes in `samples` trials."""
    if samples <= 0:
        return 0.0, 1.0
    if not 0 <= hits <= samples:
        raise ValueError(f"hits must be within 0..samples, got {hits} of {samples}")
    p = hits / samples
    z2 = z * z
    centre = p + z2 / (2 * samples)
    margin = z * math.sqrt(p * (1 - p) / samples + z2 / (4 * samples * samples))
    denominator = 1 + z2 / samples
    # Exact ends at 0 and n: the formula gives them up to rounding.
    low = 0.0 if hits == 0 else max(0.0, (centre - margin) / denominator)
    high = 1.0 if hits == samples else min(1.0, (centre + margin) / denominator)
    return low, high


def rate(hits: int, samples: int) -> Rate:
    low, high = wilson(hits, samples)
    return Rate(samples, hits, hits / samples if samples else 0.0, low, high)
