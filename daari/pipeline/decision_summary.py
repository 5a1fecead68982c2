"""A periodic summary of routing decisions at INFO: cache hits are logged one by one only at DEBUG (they are
many), so this line is where they show at the default log level.

    daari.pipeline: last 60s: 42 requests, 30 L0 hits (71%), 10 answered (L3 8, L6 2), 2 errors, 1 abandoned
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

import trio

from daari.pipeline.decision import RoutingDecision

log = logging.getLogger("daari.pipeline")


@dataclass
class DecisionSummary:
    """Counts since the last `take()`: pure bookkeeping, no clock."""

    requests: int = 0
    hits: int = 0
    errors: int = 0
    abandoned: int = 0  # the client left first (not an error)
    answered_by: Counter[str] = field(default_factory=Counter)

    def add(self, decision: RoutingDecision) -> None:
        self.requests += 1
        if decision.error is not None and decision.outcome == "abandoned":
            self.abandoned += 1
        elif decision.error is not None:
            self.errors += 1
        elif decision.cache == "hit":
            self.hits += 1
        else:
            self.answered_by[decision.tier or "none"] += 1

    def take(self, interval_s: float) -> str | None:
        """The summary line of what was counted (None when nothing happened), and a fresh start."""
        if not self.requests:
            return None
        answered = sum(self.answered_by.values())
        tiers = ", ".join(f"{tier} {n}" for tier, n in sorted(self.answered_by.items()))
        line = (f"last {interval_s:g}s: {self.requests} requests, {self.hits} L0 hits "
                f"({100 * self.hits / self.requests:.0f}%), {answered} answered" + (f" ({tiers})" if tiers else "")
                + f", {self.errors} errors" + (f", {self.abandoned} abandoned" if self.abandoned else ""))
        self.requests, self.hits, self.errors, self.abandoned = 0, 0, 0, 0
        self.answered_by.clear()
        return line


async def log_summaries(summary: DecisionSummary, interval_s: float) -> None:
    """Every `interval_s`, log the summary of the decisions counted since the last one (nothing when idle).

    `summary.add` is one of the decision hub's in-process handlers (pipeline/decision_subscribers.py).
    """
    while True:
        await trio.sleep(interval_s)
        line = summary.take(interval_s)
        if line is not None:
            log.info("%s", line)
