"""What daari remembers about agent sessions, in memory and bounded: per session, which tier holds its provider
cache and how warm it is, its cache-read totals and the last turn's real prompt size; across sessions, which
provider signed each thinking block daari served (by a hash of its signature), and how daari's token estimate
compares with what upstreams count.

Bounded LRUs (a session or a signature each counts 1): the oldest sessions are forgotten first. Lost on
restart, which costs one turn of affinity, never correctness: an unknown thinking block is left as the client
sent it, and an upstream that refuses its signature gets the request again without thinking blocks
(executors/anthropic.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from daari.cache.lru import LRU

DEFAULT_TTL_S = 300.0  # Anthropic's default cache lifetime (refreshed by each read); "1h" when the client asks
RATIO_WEIGHT = 0.2  # how much one observation moves the estimate's calibration (an exponential mean)
GROWTH_WEIGHT = 0.5


@dataclass(slots=True)
class Warmth:
    """A provider cache holding a session's prefix: which tier, how many prompt tokens, since when."""

    tier: str
    provider: str
    model: str
    warm_tokens: int
    at: float
    ttl_s: float = DEFAULT_TTL_S

    def is_warm(self, now: float) -> bool:
        return self.warm_tokens > 0 and now - self.at <= self.ttl_s


@dataclass(slots=True)
class SessionState:
    home: Warmth | None = None
    turns: int = 0
    prompt_tokens: int = 0  # reported by upstreams, summed over the session's answered turns
    cache_read_tokens: int = 0
    last_prompt_tokens: int = 0  # the last answered turn's real prompt size ...
    last_estimate: int = 0  # ... and daari's estimate of the same request
    growth_ratio: float = 0.0  # real / estimated tokens of what turns added (0: not measured yet)
    mean_output_tokens: float = 0.0
    prefix: str = ""  # the last turn's prefix fingerprint (sessions/prefix.py)


class SessionStore:
    def __init__(self, max_sessions: int = 10_000, max_signatures: int = 100_000,
                 clock: Callable[[], float] = time.time) -> None:
        self._sessions: LRU[str, SessionState] = LRU(max_sessions)
        self._signatures: LRU[str, str] = LRU(max_signatures)
        self.clock = clock
        self.ratio = 1.0  # upstream-counted / daari-estimated prompt tokens, calibrated by every answer

    def get(self, key: str) -> SessionState | None:
        return self._sessions.get(key)

    def state(self, key: str) -> SessionState:
        found = self._sessions.get(key)
        if found is None:
            found = SessionState()
            self._sessions.put(key, found, 1)
        return found

    def producer(self, signature_key: str) -> str | None:
        """The provider that signed a thinking block daari served, by `hygiene.signature_key`."""
        return self._signatures.get(signature_key)

    def signed(self, signature_keys: Iterable[str], provider: str) -> None:
        for key in signature_keys:
            self._signatures.put(key, provider, 1)

    def calibrate(self, estimated: int, counted: int, state: SessionState | None = None) -> None:
        """Learn from an answer's real prompt size: the overall ratio, and the session's ratio for what its
        turns add (messages run denser or sparser than a system prompt)."""
        if estimated <= 0 or counted <= 0:
            return
        self.ratio += RATIO_WEIGHT * (counted / estimated - self.ratio)
        if state is None or not state.last_estimate or estimated <= state.last_estimate \
                or counted <= state.last_prompt_tokens:
            return
        growth = (counted - state.last_prompt_tokens) / (estimated - state.last_estimate)
        state.growth_ratio = growth if not state.growth_ratio else \
            state.growth_ratio + GROWTH_WEIGHT * (growth - state.growth_ratio)

    def __len__(self) -> int:
        return len(self._sessions)
