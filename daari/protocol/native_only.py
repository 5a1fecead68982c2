"""Whether a request holds an item or part with no neutral form, so only an upstream of the client's own
protocol can serve it (the reason, in the client's words), from either wire's rules."""

from __future__ import annotations

from daari.protocol import openai_wire, responses_wire
from daari.protocol.chat import ChatRequest


def native_only_reason(request: ChatRequest) -> str | None:
    return responses_wire.native_only_reason(request) or openai_wire.native_only_reason(request)
