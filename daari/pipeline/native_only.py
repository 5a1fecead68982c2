"""Requests only an upstream of the client's own protocol can serve (a Responses custom tool, a hosted tool,
an item with no neutral form) go only to such tiers; with none, a clear 400 instead of a silent drop."""

from __future__ import annotations

from daari.errors import InvalidRequest
from daari.pipeline.meta import Attempt
from daari.protocol.chat import ChatRequest
from daari.protocol.responses_wire import native_only_reason

# Executor kinds that pass each client protocol through natively.
NATIVE_KINDS: dict[str, frozenset[str]] = {"responses": frozenset({"openai_responses"})}


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
            f"this request uses {reason}, which only an upstream speaking the OpenAI Responses API can serve "
            "(a tier with executor: openai and wire_api: responses); no such tier is configured for it. "
            "Remove it from the request or configure such a tier.", code="unsupported_by_upstream")
    return capable
