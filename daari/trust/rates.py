"""Rates from few samples, reported with their uncertainty: the Wilson score interval."""

from __future__ import annotations

import math


def wilson_interval(hits: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The interval (low, high) of a rate of `hits` in `total` at the confidence `z` stands for (1.96: 95%).

    0 errors in 20 is not "0%": its 95% interval reaches about 16%. No samples: (0, 1).
    """
    if total <= 0:
        return 0.0, 1.0
    if not 0 <= hits <= total:
        raise ValueError(f"hits must be between 0 and total ({total}), got {hits}")
    share = hits / total
    denominator = 1 + z * z / total
    centre = (share + z * z / (2 * total)) / denominator
    spread = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - spread), min(1.0, centre + spread)
