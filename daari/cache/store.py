"""What an L0 or L1 store is to the actors that own it, whatever holds the entries (SQLite files or Redis).

The CacheActor and the SemanticCacheActor are written against these two protocols; `cache.backend` picks the
implementation (daari/cache/l0_disk.py and l1_disk.py, l0_redis.py and l1_redis.py). A store that cannot answer
now (a failing disk, Redis down or slower than its timeout) raises `StoreUnavailable`: the actors answer
`CacheUnavailable` and the request path serves the request without the cache (pipeline/cache_guard.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from daari.cache.l0_store import L0Entry
from daari.cache.l1_store import L1Entry, StoredVectors
from daari.protocol.chat import Completion
from daari.semantic.index import Vector


class StoreUnavailable(Exception):
    """The store cannot answer now; the message says why (never an entry's content)."""


class L0Backend(Protocol):
    """Exact entries by L0 key. Puts come in batches from the CacheActor's writer, after the put was answered."""

    description: str  # where the entries live, for log lines ("<data_dir>/l0.sqlite", "redis://host/0 daari:")

    async def open(self) -> None:
        """Ready the store; a store that can never work here raises StartupError (a Redis that is down is not that)."""

    async def close(self) -> None: ...

    def unavailable(self) -> str | None:
        """Why puts are refused now (a disk that just failed, Redis down), else None."""

    async def get(self, key: str) -> L0Entry | None: ...

    async def write(self, puts: Sequence[tuple[str, L0Entry]], hits: Mapping[str, int]) -> dict[str, L0Entry]:
        """Store `puts` and the hit tally since the last batch. A key another daari stored first keeps that entry
        (never overwritten); such keys are returned with the entry that stays, so memory can show the same."""

    async def count(self) -> int: ...


@dataclass(frozen=True)
class NewL1Entry:
    """An answer to index, as the SemanticCacheActor is asked to store it."""

    context: str
    embed_text: str
    vector: Vector
    completion: Completion
    tier: str
    task_type: str | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class Evicted:
    """What an eviction pass removed: these ids and, from a shared store, every id below `below` (the oldest entry
    left; -1 when none is left: then every id known before the pass is gone)."""

    ids: Sequence[int] = ()
    below: int | None = None


@dataclass(frozen=True)
class VectorRows:
    """Entries' ids, lookup-context ids and vectors, in the order they were stored."""

    rows: StoredVectors
    position: str = ""  # where a follower continues from (a shared store's stream id)


@dataclass
class L1Shape:
    """What the SemanticCacheActor must know about its store."""

    index_path: Path | None  # where the vector index is saved between runs; None: rebuilt at every start
    shared: bool = False  # other daari write the same entries: `follow` delivers them (and this one's own)
    notes: dict[str, str] = field(default_factory=dict)


class L1Backend(Protocol):
    shape: L1Shape
    description: str

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def put(self, entry: NewL1Entry) -> int:
        """Store `entry`; its id. The same prompt in the same context stored again keeps the first entry's id."""

    async def get_many(self, ids: Sequence[int]) -> dict[int, L1Entry]:
        """The entries of `ids` that still exist."""

    async def vectors(self) -> VectorRows:
        """Every live entry's vector, oldest first: what the index is built from at start."""

    async def evict(self, max_entries: int, max_age_s: float) -> Evicted: ...

    async def demote(self, entry_id: int) -> bool:
        """A shadow sample found the entry's answer wrong: never served again, by any daari sharing the store.
        False: it was not there (or demoted already)."""

    async def count(self) -> int: ...

    def follow(self, position: str) -> AsyncIterator[VectorRows]:
        """A shared store: entries stored after `position`, by any daari, as they come (waits while the store is
        unavailable). A store of this daari alone never yields."""
