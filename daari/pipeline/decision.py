"""RoutingDecision: one record per chat request of what daari decided and how long it took.

Published to the decision hub when the request ends (answered, refused, or abandoned by its client).
It never holds content (prompts, answers) or headers: only what daari_meta says, timings and counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from daari.jsonio import dumps
from daari.pipeline.client_family import client_family
from daari.pipeline.meta import Meta

__all__ = ["CLIENT_CLOSED", "CLIENT_DISCONNECTED", "AttemptRecord", "RequestFacts", "RoutingDecision",
           "client_family", "decide", "outcome"]

# Status recorded for a request whose client went away before it was answered (nginx's convention).
CLIENT_CLOSED = 499
CLIENT_DISCONNECTED = "client_disconnected"  # its error code


def outcome(error: str | None, status: int | None) -> str:
    """"answered", "abandoned" (the client left first: `claude -p` exits before its title call ends; not
    daari's fault, so not an error) or "error"."""
    if error == CLIENT_DISCONNECTED or status == CLIENT_CLOSED:
        return "abandoned"
    return "error" if error is not None else "answered"

@dataclass(frozen=True)
class AttemptRecord:
    tier: str
    outcome: str
    confidence: float | None = None
    error: str | None = None
    violations: tuple[str, ...] = ()
    started: float | None = None  # Unix times of a tier actually asked (None: skipped); not in to_json
    ended: float | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tier": self.tier, "outcome": self.outcome, "confidence": self.confidence,
                                "error": self.error}
        if self.violations:
            data["violations"] = list(self.violations)
        return data


@dataclass(slots=True)
class RoutingDecision:
    """What happened to one request. Field meanings: docs/architecture.md, "The decision hub".

    Read-only by convention: every subscriber gets the same object. Not `frozen`, because a frozen dataclass
    sets each of its 28 fields through `object.__setattr__`, and one is built for every request (slots: 7x
    cheaper to build, measured with timeit).
    """

    request_id: str
    time: float  # Unix time the request arrived
    protocol: str  # "openai" or "anthropic" (the client's protocol)
    client: str  # client family from the User-Agent
    model_requested: str | None
    stream: bool
    status: int  # HTTP status answered (499: the client left first)
    tier: str | None
    executor: str | None
    model: str | None  # the model that answered
    cache: str  # "hit", "miss", "off", "skipped" (X-Daari-No-Cache), "bypassed" (the cache failed)
    task_type: str | None
    rule_id: str | None
    ceiling: str | None
    classifier: str
    agent_turn: bool
    confidence: float | None
    escalated_from: tuple[str, ...]
    attempts: tuple[AttemptRecord, ...]
    warning: str | None
    error: str | None
    latency_ms: float  # arrival -> last byte of the response
    ttft_ms: float | None  # arrival -> response start (a stream's first event; a JSON body entire)
    prompt_tokens: int | None
    completion_tokens: int | None
    details: dict[str, Any] = field(default_factory=dict)  # what a shortcut tier reported
    prompt_hash: str | None = None  # log.prompts hash|full: keyed hash of the last user message
    prompt: str | None = None  # log.prompts full only; never in to_json (the tail and metrics never see it)
    # Agent sessions (docs/observability.md, "Sessions and provider caches"): the session (a hash), the call type,
    # prompt tokens read from / written to the provider's cache, what session affinity did, and the prompt tokens
    # another tier held warm that this answer paid for in full.
    session: str | None = None
    call_type: str | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    affinity: str | None = None
    lost_cache_tokens: int = 0
    _json_text: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def json_text(self) -> str:
        """`to_json` serialized once, however many live tails send it."""
        if self._json_text is None:
            self._json_text = dumps(self.to_json()).decode()
        return self._json_text

    @property
    def cache_hit(self) -> bool:
        return self.cache == "hit"

    @property
    def outcome(self) -> str:
        """"answered", "abandoned" or "error" (see `outcome`)."""
        return outcome(self.error, self.status)

    def to_json(self) -> dict[str, Any]:
        """A flat JSON-ready dict (the decision log's row, the live tail's message)."""
        return {
            "request_id": self.request_id, "time": self.time, "protocol": self.protocol, "client": self.client,
            "model_requested": self.model_requested, "stream": self.stream, "status": self.status,
            "tier": self.tier, "executor": self.executor, "model": self.model, "cache": self.cache,
            "task_type": self.task_type, "rule_id": self.rule_id, "ceiling": self.ceiling,
            "classifier": self.classifier, "agent_turn": self.agent_turn, "confidence": self.confidence,
            "escalated_from": list(self.escalated_from),
            "attempts": [a.to_json() for a in self.attempts],
            "warning": self.warning, "error": self.error, "latency_ms": self.latency_ms,
            "ttft_ms": self.ttft_ms, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "details": dict(self.details),
            "prompt_hash": self.prompt_hash, "session": self.session, "call_type": self.call_type,
            "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens,
            "affinity": self.affinity, "lost_cache_tokens": self.lost_cache_tokens,
        }


@dataclass(slots=True)
class RequestFacts:
    """What is known about a request before routing: its identity, not its content (filled in as it is parsed)."""

    request_id: str
    time: float
    protocol: str
    client: str
    model_requested: str | None = None
    stream: bool = False
    prompt_hash: str | None = None
    prompt: str | None = None


_NONE: tuple[Any, ...] = ()


def decide(facts: RequestFacts, meta: Meta, *, status: int, latency_ms: float, ttft_ms: float | None,
           error: str | None = None) -> RoutingDecision:
    """The decision record of a request from what its pipeline put in `meta`."""
    usage = meta.usage
    attempts = meta.attempts
    details = meta.details
    # Positional, in field order: one is built per request, and 28 keyword arguments cost 2.7x as much
    # (1.7 vs 0.6 us, timeit). tests/test_decisions.py checks that every field gets its own value.
    return RoutingDecision(
        facts.request_id, facts.time, facts.protocol, facts.client, facts.model_requested, facts.stream, status,
        meta.tier, meta.executor, meta.model, meta.cache, meta.task_type, meta.rule_id, meta.ceiling,
        meta.classifier, meta.agent_turn, meta.confidence,
        tuple(meta.escalated_from) if meta.escalated_from else _NONE,
        tuple([AttemptRecord(a.tier, a.outcome, a.confidence, a.error, a.violations, a.started, a.ended)
               for a in attempts])
        if attempts else _NONE,
        meta.warning, meta.error or error, latency_ms, ttft_ms,
        usage.prompt_tokens if usage is not None else None, usage.completion_tokens if usage is not None else None,
        dict(details) if details else {}, facts.prompt_hash, facts.prompt, meta.session, meta.call_type,
        usage.cached_tokens if usage is not None else None, usage.cache_write_tokens if usage is not None else None,
        meta.affinity, meta.lost_cache_tokens,
    )
