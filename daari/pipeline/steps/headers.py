"""Routing spec step 2: the control headers and the caller's cache partition, read before the body is parsed.

Reads: the request headers. Decides: `turn.controls` (X-Daari-Tier-Override, X-Daari-No-Cache; a bad value is
refused), `turn.partition` and whether the request reads and stores L0 (`turn.cache_on`, `daari_meta.cache`).
"""

from __future__ import annotations

from daari.cache.partition import cache_partition
from daari.pipeline.controls import parse_controls
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn


class HeadersStep:
    name = "headers"

    def __init__(self, l0_enabled: bool, partition_secret: bytes | None) -> None:
        self.l0_enabled = l0_enabled
        self.partition_secret = partition_secret  # None: one shared partition (no tier forwards client keys)

    async def __call__(self, turn: Turn) -> Answer | None:
        controls = parse_controls(turn.headers)
        turn.controls = controls
        turn.partition = cache_partition(self.partition_secret, turn.headers)
        turn.cache_on = self.l0_enabled and not controls.no_cache
        if not turn.cache_on:
            turn.meta.cache = "skipped" if self.l0_enabled else "off"
        return None
