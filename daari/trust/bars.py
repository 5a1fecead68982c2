"""Learned similarity bars for L1 (`cache.l1.error_bound`): raised where shadow samples found false hits,
lowered again where agreeing samples outweigh them, never below the configured floor.

The estimator, per task type (docs/caching.md, "Adaptive trust"): the shadow samples of L1 hits of that task
type are (similarity of the served candidate, did the fresh answer disagree?), undecided ones left out. For a
bar t, the hits L1 would still serve are the samples at or above t; their observed false-hit rate is
k(t) / n(t). The bar is the lowest t, from the floor up, where that rate is within the bound: k(t) <= bound *
n(t). Candidates are the floor and a step above each disagreeing sample, so a bar sits just above a false
hit. Adding Beta prior pseudo-counts centred on the bound changes nothing (they cancel out of the
inequality), so there is none. With no samples the bar is the floor; one false hit raises the bar above it
until 1 / bound agreeing samples above it bring it back. The bar never goes past 1.0 (then only a
candidate whose embedding is the same as the request's is served). Each entry that disagreed is demoted
besides (never served from L1 again): the per-entry part of the same evidence.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

STEP = 1e-4  # a bar sits this far above the similarity of the false hit it excludes


@dataclass(frozen=True)
class Sample:
    """One decided shadow outcome of an L1 hit."""

    similarity: float
    disagreed: bool


@dataclass(frozen=True)
class Bar:
    bar: float
    floor: float
    samples: int  # decided samples seen for this key
    disagreements: int
    served_above: int  # samples at or above the bar
    disagreements_above: int

    @property
    def raised(self) -> bool:
        return self.bar > self.floor

    def to_json(self) -> dict[str, object]:
        return {"bar": self.bar, "floor": self.floor, "raised": self.raised, "samples": self.samples,
                "disagreements": self.disagreements, "served_above": self.served_above,
                "disagreements_above": self.disagreements_above}


def bar_above(value: float) -> float:
    """The candidate bar just above a false hit's similarity (a multiple of STEP, at most 1.0)."""
    return min(1.0, math.ceil((value + STEP) * 10_000) / 10_000)


def learn_bar(samples: Iterable[Sample], floor: float, bound: float) -> Bar:
    """The lowest bar >= `floor` whose served samples' false-hit rate is within `bound` (the estimator above)."""
    ordered = sorted(samples, key=lambda s: s.similarity)
    similarities = [s.similarity for s in ordered]
    # disagreements at or above index i: a suffix sum
    suffix = [0] * (len(ordered) + 1)
    for i in range(len(ordered) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + (1 if ordered[i].disagreed else 0)
    candidates = sorted({floor, *(bar_above(s.similarity) for s in ordered if s.disagreed and s.similarity >= floor)})
    chosen, served, wrong = candidates[-1], 0, 0
    for t in candidates:
        at = bisect_left(similarities, t)
        n, k = len(ordered) - at, suffix[at]
        if k <= bound * n:
            chosen, served, wrong = t, n, k
            break
    else:
        at = bisect_left(similarities, chosen)
        served, wrong = len(ordered) - at, suffix[at]
    return Bar(round(max(chosen, floor), 4), floor, len(ordered), suffix[0], served, wrong)


class LearnedBars:
    """The bars L1 reads on every lookup (a dict read), and the ShadowActor refits from its outcomes."""

    def __init__(self, floor: float, bound: float | None) -> None:
        self.floor = floor
        self.bound = bound  # None: learning is off, every bar is the floor
        self.bars: dict[str, Bar] = {}

    def threshold(self, task_type: str | None) -> float:
        bar = self.bars.get(task_type or "unknown")
        return bar.bar if bar is not None else self.floor

    def fit(self, samples: Mapping[str, Iterable[Sample]]) -> None:
        if self.bound is None:
            return
        bound = self.bound
        self.bars = {task: learn_bar(rows, self.floor, bound) for task, rows in samples.items()}

    def to_json(self) -> dict[str, object]:
        return {"floor": self.floor, "error_bound": self.bound,
                "by_task_type": {task: bar.to_json() for task, bar in sorted(self.bars.items())}}
