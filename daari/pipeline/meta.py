"""daari_meta: what daari did with a request, in every response body and as response headers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from daari.protocol.chat import Usage


@dataclass(slots=True)
class Attempt:
    tier: str
    outcome: str  # "accepted", "low_confidence", "failed", "skipped_no_tools"
    confidence: float | None = None
    error: str | None = None
    violations: tuple[str, ...] = ()  # why the judge held the answer back (a gate, the constraints it broke)
    # Unix times the tier was asked and its answer judged (or its failure known); None for a tier left out of the
    # chain (skipped_*). For the trace's attempt spans (observe/otel.py), not rendered in daari_meta.
    started: float | None = None
    ended: float | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tier": self.tier, "outcome": self.outcome, "confidence": self.confidence,
                                "error": self.error}
        if self.violations:  # only where there are some: the spec's four keys otherwise
            data["violations"] = list(self.violations)
        return data


@dataclass(slots=True)  # one per request: slots make it cheaper to build and read
class Meta:
    tier: str | None = None
    task_type: str | None = None
    cache_hit: bool = False
    executor: str | None = None
    model: str | None = None
    latency_ms: float | None = None
    confidence: float | None = None
    escalated_from: list[str] | None = None  # tiers tried before the one that answered (the decision keeps all)
    rule_id: str | None = None
    agent_turn: bool = False
    ceiling: str | None = None
    classifier: str = "heuristic"  # "heuristic", "slm" (Phase B verdict used), "slm_fallback" (malformed)
    attempts: list[Attempt] = field(default_factory=list)
    warning: str | None = None
    error: str | None = None
    # "hit", "miss", "off" (cache.l0.enabled false), "skipped" (X-Daari-No-Cache), "bypassed" (the cache failed),
    # "none" (refused or abandoned before routing: the cache was never asked)
    cache: str = "miss"
    usage: Usage | None = None  # of the answer served; for the decision record, not rendered
    # What a shortcut tier reported (similarity, verified_by, tool, confirmation_required...), merged as-is.
    details: dict[str, Any] = field(default_factory=dict)
    # Hosted tools the client offered that the answering tier could not run (pipeline/hosted_tools.py).
    dropped_tools: list[str] | None = None
    # Agent sessions (daari/sessions/): the session (hashed), Claude Code's call type, what session affinity did
    # ("home", "stay", "move", "cold", "new"), and prompt tokens another tier held warm that this answer paid for.
    session: str | None = None
    call_type: str | None = None
    affinity: str | None = None
    lost_cache_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        # Written out rather than dataclasses.asdict: this runs on every response, hits included.
        data: dict[str, Any] = {
            "tier": self.tier, "task_type": self.task_type, "cache_hit": self.cache_hit,
            "executor": self.executor, "model": self.model, "latency_ms": self.latency_ms,
            # The spec's shape: the one tier the answer escalated from (the first tried); `attempts` has the path.
            "confidence": self.confidence, "escalated_from": self.escalated_from[0] if self.escalated_from else None,
            "rule_id": self.rule_id,
            "agent_turn": self.agent_turn, "ceiling": self.ceiling, "classifier": self.classifier,
            "cache": self.cache,
            "attempts": [a.to_json() for a in self.attempts],
        }
        if self.session is not None:
            data["session"] = self.session
            data["affinity"] = self.affinity
        if self.call_type is not None:
            data["call_type"] = self.call_type
        if self.warning is not None:
            data["warning"] = self.warning
        if self.error is not None:
            data["error"] = self.error
        if self.dropped_tools:
            data["dropped_tools"] = self.dropped_tools
        if self.details:
            data.update(self.details)
        return data

    def headers(self, cache_bypassed: bool = False) -> dict[str, str]:
        if self.cache == "bypassed":
            cache = "bypassed"  # the cache failed and was routed around
        else:
            cache = "bypass" if cache_bypassed else ("hit" if self.cache_hit else "miss")
        headers = {"x-daari-tier": self.tier or "none", "x-daari-cache": cache}
        if self.dropped_tools:
            headers["x-daari-dropped-tools"] = ",".join(self.dropped_tools)
        if self.details and "budget" in self.details:  # set by the budget planner (pipeline/steps/budget.py)
            headers["x-daari-budget"] = str(self.details["budget"])
        return headers
