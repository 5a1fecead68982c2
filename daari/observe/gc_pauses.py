"""The cyclic garbage collector's pauses, timed: `daari_gc_pause_seconds{generation}` on /metrics.

A collection stops every task of the event loop until it ends: a full one over 1,000 held streams took ~0.1 s
(docs/performance.md), the first place to look when streams' gaps or a p99 jump.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from daari.metrics import HistogramFamily, record

_GENERATIONS = ("0", "1", "2")


class GCPauses:
    """Times each collection of this process from gc.callbacks' start to its stop, into `histogram`."""

    __slots__ = ("_series", "_started")

    def __init__(self, histogram: HistogramFamily) -> None:
        self._series = [histogram.series((generation,)) for generation in _GENERATIONS]  # listed at 0 from start
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        # Collections never overlap (CPython runs one at a time, whichever thread set it off), so one start time
        # and unlocked counts are enough.
        if phase == "start":
            self._started = time.perf_counter()
        else:
            record(self._series[info["generation"]], time.perf_counter() - self._started)


@contextmanager
def timed_collections(histogram: HistogramFamily) -> Iterator[GCPauses]:
    """Time every collection while inside (gc.callbacks is process-wide: every server of the process counts all)."""
    callback = GCPauses(histogram)
    gc.callbacks.append(callback)
    try:
        yield callback
    finally:
        gc.callbacks.remove(callback)
