"""Requests only an upstream of the client's own protocol can serve (a Responses custom tool, a hosted tool,
an item with no neutral form; a chat content part such as input_audio) go only to such tiers; with none, a
clear 400 instead of a silent drop."""

from __future__ import annotations

from daari.errors import InvalidRequest
from daari.pipeline.meta import Attempt
from daari.protocol import openai_wire, responses_wire
from daari.protocol.chat import ChatRequest

# Executor kinds that pass each client protocol through natively, and how to name them in a refusal.
NATIVE_KINDS: dict[str, frozenset[str]] = {"responses": frozenset({"openai_responses"}),
                                           "openai": frozenset({"openai"})}
NATIVE_TIER = {
    "responses": "an upstream speaking the OpenAI Responses API (a tier with executor: openai and wire_api: "
                 "responses)",
    "openai": "an OpenAI-compatible chat upstream (a tier with executor: openai)",
}


def native_only_reason(request: ChatRequest) -> str | None:
    return responses_wire.native_only_reason(request) or openai_wire.native_only_reason(request)


def native_tiers(request: ChatRequest, chain: list[str], configured: list[str], kinds: dict[str, str],
                 attempts: list[Attempt], override: bool) -> list[str]:
    """`chain` without the tiers that would have to translate what cannot be translated.

    Past the classified ceiling, any configured native tier may answer (as for tool calls, it is the only
    tier left), unless the client forced a tier.
    """
    reason = native_only_reason(request)
    if reason is None:
        return chain
    native = NATIVE_KINDS.get(request.protocol, frozenset())
    capable = [t for t in chain if kinds.get(t) in native]
    for tier in chain:
        if tier not in capable:
            attempts.append(Attempt(tier, "skipped_not_native"))
    if not capable and not override:
        capable = [t for t in configured if kinds.get(t) in native]
    if not capable:
        raise InvalidRequest(
            f"this request uses {reason}, which only {NATIVE_TIER.get(request.protocol, 'a native upstream')} "
            "can serve; no such tier is configured for it. Remove it from the request or configure such a tier.",
            code="unsupported_by_upstream")
    return capable
