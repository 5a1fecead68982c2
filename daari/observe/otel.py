"""OpenTelemetry traces of decisions, as OTLP/JSON (docs/observability.md, "OpenTelemetry traces"): pure functions.

One trace per request: a root span `chat <model>` with the GenAI semantic-convention attributes (operation, request
and response model, token usage) and daari's own (tier, cache, task type, status), and one child span per tier
attempt of its escalation (tier, outcome, confidence, error). No prompt or answer text: a decision holds none.
Each attempt span has its own interval (when the tier was asked, when its answer was judged or its failure known),
kept within the root's; a tier left out of the chain (skipped_*) was never asked: a zero-length span at the root's
start.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from daari.pipeline.decision import RoutingDecision

SCOPE = {"name": "daari", "version": "1"}
SPAN_KIND_SERVER, SPAN_KIND_INTERNAL = 2, 1
STATUS_OK, STATUS_ERROR = 1, 2


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # OTLP/JSON writes 64-bit integers as strings
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def attributes(pairs: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in pairs if value is not None]


def _ids(request_id: str) -> tuple[str, str]:
    """(trace id, root span id) from the request id: the same request always maps to the same trace."""
    digest = hashlib.sha256(request_id.encode()).hexdigest()
    return digest[:32], digest[32:48]


def _span_id(trace_id: str, index: int) -> str:
    return hashlib.sha256(f"{trace_id}:{index}".encode()).hexdigest()[:16]


def decision_spans(decision: RoutingDecision) -> list[dict[str, Any]]:
    trace_id, root_id = _ids(decision.request_id)
    start = int(decision.time * 1e9)
    end = start + int(decision.latency_ms * 1e6)
    failed = decision.status >= 400 or decision.error is not None
    root = {
        "traceId": trace_id, "spanId": root_id, "name": f"chat {decision.model_requested or ''}".strip(),
        "kind": SPAN_KIND_SERVER, "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
        "attributes": attributes([
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.request.model", decision.model_requested),
            ("gen_ai.response.model", decision.model),
            ("gen_ai.usage.input_tokens", decision.prompt_tokens),
            ("gen_ai.usage.output_tokens", decision.completion_tokens),
            ("daari.request_id", decision.request_id),
            ("daari.protocol", decision.protocol),
            ("daari.client", decision.client),
            ("daari.tier", decision.tier),
            ("daari.executor", decision.executor),
            ("daari.cache", decision.cache),
            ("daari.task_type", decision.task_type),
            ("daari.agent_turn", decision.agent_turn),
            ("daari.stream", decision.stream),
            ("daari.confidence", decision.confidence),
            ("daari.session", decision.session),
            ("daari.ttft_ms", decision.ttft_ms),
            ("http.response.status_code", decision.status),
            ("error.type", decision.error),
        ]),
        "status": {"code": STATUS_ERROR, "message": decision.error or ""} if failed else {"code": STATUS_OK},
    }
    spans = [root]
    for index, attempt in enumerate(decision.attempts, start=1):
        began = _within(attempt.started, start, end, start)
        ended = _within(attempt.ended, began, end, began)
        spans.append({
            "traceId": trace_id, "spanId": _span_id(trace_id, index), "parentSpanId": root_id,
            "name": f"attempt {attempt.tier}", "kind": SPAN_KIND_INTERNAL,
            "startTimeUnixNano": str(began), "endTimeUnixNano": str(ended),
            "attributes": attributes([("daari.tier", attempt.tier), ("daari.attempt.outcome", attempt.outcome),
                                      ("daari.confidence", attempt.confidence), ("error.type", attempt.error)]),
            "status": {"code": STATUS_ERROR if attempt.error else STATUS_OK},
        })
    return spans


def _within(when: float | None, low: int, high: int, default: int) -> int:
    """Unix time `when` in nanoseconds, kept in [low, high]: the root's end is its start plus a monotonic latency,
    the attempt's times are wall-clock, and a child must not poke out of its parent over a clock step."""
    if when is None:
        return default
    return min(high, max(low, int(when * 1e9)))


def export_request(decisions: Sequence[RoutingDecision], service_name: str) -> dict[str, Any]:
    """An OTLP ExportTraceServiceRequest (JSON encoding) for a batch of decisions."""
    return {"resourceSpans": [{
        "resource": {"attributes": attributes([("service.name", service_name)])},
        "scopeSpans": [{"scope": SCOPE, "spans": [s for d in decisions for s in decision_spans(d)]}],
    }]}
