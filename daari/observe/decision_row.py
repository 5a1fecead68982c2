"""A routing decision -> one decision-log row: flat columns, costs priced, no headers, prompt per policy."""

from __future__ import annotations

import json
from typing import Any

from daari.config import PricingConfig
from daari.pipeline.decision import RoutingDecision
from daari.pricing import estimate_cost, frontier_cost


def l1_verdict(details: dict[str, Any]) -> str | None:
    """The L1 verifier's verdict as the report counts it: "accepted", "rejected", or None (L1 did not judge)."""
    verdict = details.get("verdict")
    if isinstance(verdict, str):
        return verdict
    if isinstance(verdict, dict) and "accepted" in verdict:
        return "accepted" if verdict["accepted"] else "rejected"
    if details.get("verified_by"):
        return "accepted"
    return None


def decision_row(decision: RoutingDecision, pricing: PricingConfig) -> dict[str, Any]:
    details = decision.details
    prompt_tokens = decision.prompt_tokens or 0
    completion_tokens = decision.completion_tokens or 0
    answered = decision.tier is not None and decision.error is None
    actual = (estimate_cost(pricing, decision.tier, decision.model, prompt_tokens, completion_tokens)
              if answered else 0.0)
    at_l6 = frontier_cost(pricing, prompt_tokens, completion_tokens) if answered else 0.0
    similarity = details.get("similarity")
    return {
        "request_id": decision.request_id, "time": decision.time, "protocol": decision.protocol,
        "client": decision.client, "model": decision.model_requested, "stream": int(decision.stream),
        "tier": decision.tier, "task_type": decision.task_type, "rule_id": decision.rule_id,
        "cache": decision.cache, "cache_level": decision.tier if decision.tier in ("L0", "L1") else None,
        "similarity": float(similarity) if isinstance(similarity, int | float) else None,
        "verdict": l1_verdict(details),
        "escalated_from": ",".join(decision.escalated_from) or None,
        "attempts": json.dumps([{"tier": a.tier, "outcome": a.outcome, "confidence": a.confidence,
                                 "error": a.error} for a in decision.attempts], separators=(",", ":")),
        "agent_turn": int(decision.agent_turn), "latency_ms": decision.latency_ms, "ttft_ms": decision.ttft_ms,
        "input_tokens": prompt_tokens, "output_tokens": completion_tokens,
        "cost_usd": round(actual, 8), "cost_l6_usd": round(at_l6, 8), "saved_usd": round(at_l6 - actual, 8),
        "status": decision.status, "error": decision.error,
        "prompt_hash": decision.prompt_hash, "prompt": decision.prompt,
    }
