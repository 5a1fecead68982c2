"""Requests only an upstream of the client's own protocol can serve (an item or part with no neutral form;
a chat content part such as input_audio) go only to such tiers; with none, a clear 400 instead of a silent
drop. Hosted tools follow each tier's `hosted_tools` policy (`pipeline/hosted_tools.py`)."""

from __future__ import annotations

from collections.abc import Mapping

from daari.errors import InvalidRequest
from daari.pipeline.hosted_tools import tier_takes, uses_hosted
from daari.pipeline.meta import Attempt
from daari.protocol import responses_wire
from daari.protocol.chat import ChatRequest
from daari.protocol.native_only import native_only_reason

# Executor kinds that pass each client protocol through natively, and how to name them in a refusal.
NATIVE_KINDS: dict[str, frozenset[str]] = {"responses": frozenset({"openai_responses"}),
                                           "openai": frozenset({"openai"})}
NATIVE_TIER = {
    "responses": "an upstream speaking the OpenAI Responses API (a tier with executor: openai and wire_api: "
                 "responses)",
    "openai": "an OpenAI-compatible chat upstream (a tier with executor: openai)",
}


def _hosted_reason(request: ChatRequest) -> str:
    offered = responses_wire.hosted_tools(request)
    if offered:
        return f"the hosted tools {', '.join(offered)}"
    return f"hosted tool calls in its history ({', '.join(sorted(set(request.shapes.tool_items)))})"


def native_tiers(request: ChatRequest, chain: list[str], configured: list[str], kinds: dict[str, str],
                 attempts: list[Attempt], override: bool, policies: Mapping[str, str] | None = None) -> list[str]:
    """`chain` without the tiers that would have to translate what cannot be translated (or that refuse the
    request's hosted tools).

    Past the classified ceiling, any configured native tier may answer (as for tool calls, it is the only
    tier left), unless the client forced a tier.
    """
    reason = native_only_reason(request)
    policies = policies or {}
    refusing = uses_hosted(request) and any(policies.get(t) == "refuse" for t in chain)
    if reason is None and not refusing:
        return chain
    native = NATIVE_KINDS.get(request.protocol, frozenset())

    def takes(tier: str) -> bool:
        if kinds.get(tier) in native:
            return True
        return reason is None and tier_takes(request, kinds.get(tier), policies.get(tier, "drop"))

    capable = [t for t in chain if takes(t)]
    for tier in chain:
        if tier not in capable:
            attempts.append(Attempt(tier, "skipped_not_native"))
    if not capable and not override:
        capable = [t for t in configured if kinds.get(t) in native]
    if not capable:
        what = reason or f"{_hosted_reason(request)}, which its tiers refuse (hosted_tools: refuse)"
        raise InvalidRequest(
            f"this request uses {what}; only {NATIVE_TIER.get(request.protocol, 'a native upstream')} "
            "can serve it and no such tier is configured for it. Remove it from the request or configure such "
            "a tier.", code="unsupported_by_upstream")
    return capable
