"""daari_meta: what daari did with a request, in every response body and as response headers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Attempt:
    tier: str
    outcome: str  # "accepted", "low_confidence", "failed", "skipped_no_tools"
    confidence: float | None = None
    error: str | None = None


@dataclass
class Meta:
    tier: str | None = None
    task_type: str | None = None
    cache_hit: bool = False
    executor: str | None = None
    model: str | None = None
    latency_ms: float | None = None
    confidence: float | None = None
    escalated_from: list[str] | None = None
    rule_id: str | None = None
    agent_turn: bool = False
    ceiling: str | None = None
    classifier: str = "heuristic"  # "heuristic", "slm" (Phase B verdict used), "slm_fallback" (malformed)
    attempts: list[Attempt] = field(default_factory=list)
    warning: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for optional in ("warning", "error"):
            if data[optional] is None:
                del data[optional]
        return data

    def headers(self, cache_bypassed: bool = False) -> dict[str, str]:
        cache = "bypass" if cache_bypassed else ("hit" if self.cache_hit else "miss")
        return {"x-daari-tier": self.tier or "none", "x-daari-cache": cache}
