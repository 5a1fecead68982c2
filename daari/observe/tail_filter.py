"""Live-tail filters from a query string (`tier=L0,L3&agent=true&cache=hit&protocol=anthropic`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from urllib.parse import parse_qs

FILTER_KEYS = ("tier", "agent", "cache", "protocol")


class FilterError(ValueError):
    pass


class Decision(Protocol):
    """What a filter reads of a routing decision (daari.pipeline.decision.RoutingDecision has it)."""

    @property
    def tier(self) -> str | None: ...
    @property
    def agent_turn(self) -> bool: ...
    @property
    def cache(self) -> str: ...
    @property
    def protocol(self) -> str: ...


@dataclass(frozen=True)
class TailFilter:
    tiers: frozenset[str] = frozenset()
    agent: bool | None = None
    cache: frozenset[str] = frozenset()
    protocols: frozenset[str] = frozenset()

    def matches(self, decision: Decision) -> bool:
        """Runs in the publishing request's task for every decision: attribute reads only, no copies."""
        if self.tiers and decision.tier not in self.tiers:
            return False
        if self.agent is not None and decision.agent_turn != self.agent:
            return False
        if self.cache and decision.cache not in self.cache:
            return False
        return not (self.protocols and decision.protocol not in self.protocols)


def _values(query: dict[str, list[str]], key: str) -> frozenset[str]:
    return frozenset(v.strip() for raw in query.get(key, []) for v in raw.split(",") if v.strip())


def parse_filter(query_string: str) -> TailFilter:
    query = parse_qs(query_string, keep_blank_values=False)
    unknown = sorted(set(query) - set(FILTER_KEYS) - {"token"})
    if unknown:
        raise FilterError(f"unknown tail filter {', '.join(unknown)} (known: {', '.join(FILTER_KEYS)})")
    agent_values = _values(query, "agent")
    agent: bool | None = None
    if agent_values:
        if len(agent_values) != 1 or next(iter(agent_values)).lower() not in ("true", "false", "1", "0"):
            raise FilterError("agent= takes true or false")
        agent = next(iter(agent_values)).lower() in ("true", "1")
    return TailFilter(frozenset(t.upper() if t.upper() != "LT" else "Lt" for t in _values(query, "tier")),
                      agent, _values(query, "cache"), _values(query, "protocol"))
