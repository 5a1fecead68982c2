"""A routing decision (its JSON) -> one decision-log row: flat columns, costs priced, no content."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

# (tier, model, prompt_tokens, completion_tokens) -> estimated USD; see daari/pricing.py.
CostFn = Callable[[str | None, str | None, int, int], float]


def cache_level(decision: Mapping[str, Any]) -> str | None:
    tier = decision.get("tier")
    return str(tier) if tier in ("L0", "L1") else None


def decision_row(decision: Mapping[str, Any], cost: CostFn) -> dict[str, Any]:
    details = decision.get("details") or {}
    tier = decision.get("tier")
    prompt_tokens = int(decision.get("prompt_tokens") or 0)
    completion_tokens = int(decision.get("completion_tokens") or 0)
    answered = tier is not None and not decision.get("error")
    actual = cost(tier, decision.get("model"), prompt_tokens, completion_tokens) if answered else 0.0
    at_l6 = cost("L6", None, prompt_tokens, completion_tokens) if answered else 0.0
    verdict = details.get("verdict") or details.get("verifier_verdict")
    if verdict is None and details.get("verified_by"):
        verdict = "accepted"
    return {
        "request_id": decision["request_id"], "time": float(decision["time"]),
        "protocol": decision.get("protocol"), "client": decision.get("client"),
        "model": decision.get("model_requested"), "stream": int(bool(decision.get("stream"))),
        "tier": tier, "task_type": decision.get("task_type"), "rule_id": decision.get("rule_id"),
        "cache": decision.get("cache"), "cache_level": cache_level(decision),
        "similarity": details.get("similarity"), "verdict": verdict,
        "escalated_from": ",".join(decision.get("escalated_from") or ()) or None,
        "attempts": json.dumps(decision.get("attempts") or [], separators=(",", ":")),
        "agent_turn": int(bool(decision.get("agent_turn"))),
        "latency_ms": decision.get("latency_ms"), "ttft_ms": decision.get("ttft_ms"),
        "input_tokens": prompt_tokens, "output_tokens": completion_tokens,
        "cost_usd": round(actual, 8), "cost_l6_usd": round(at_l6, 8), "saved_usd": round(at_l6 - actual, 8),
        "status": decision.get("status"), "error": decision.get("error"),
        "prompt_hash": decision.get("prompt_hash"), "prompt": decision.get("prompt"),
    }
