"""SemanticCacheActor: the local L1, one vector index (actors/l1_index.py: annoy + an exact buffer) over the L1
store (SQLite, or Redis shared with other daari), and the messages L1 is asked with."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from actors.l1_index import IndexStats, L1Index, Match
from actors.runtime import Actor, Call, handles
from daari.cache.store import L1Backend, NewL1Entry
from daari.protocol.chat import Completion
from daari.semantic.index import Vector

__all__ = ["IndexStats", "L1Count", "L1Demote", "L1MayHold", "L1Lookup", "L1Put", "L1Rebuild", "Match",
           "SemanticCacheActor"]


@dataclass(frozen=True)
class L1Lookup(Call[list[Match]]):
    """Candidates for `vector` within `context`, nearest first."""

    vector: Vector
    context: str
    threshold: float
    limit: int = 3


@dataclass(frozen=True)
class L1MayHold(Call[bool]):
    """Whether any entry may share `context`; False is a certain miss (the index's census, semantic/census.py).
    Asked through the mailbox, after every put told before it: an answer stored before a request was sent is
    counted for it."""

    context: str


@dataclass(frozen=True)
class L1Put(Call[int]):
    """Store an answer; the reply is its row id."""

    context: str
    embed_text: str
    vector: Vector
    completion: Completion
    tier: str
    task_type: str | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class L1Demote(Call[bool]):
    """A shadow sample disagreed with this entry's answer: never serve it from L1 again (persisted); the reply
    says whether it was servable until now."""

    entry_id: int


@dataclass(frozen=True)
class L1Count(Call[int]):
    """Entries in the index."""


@dataclass(frozen=True)
class L1Rebuild(Call[int]):
    """Rebuild the annoy index now and answer (with its size) when it is swapped in (bench and tests)."""


class SemanticCacheActor(Actor):
    name = "l1"

    def __init__(self, store: L1Backend | Path, *, max_entries: int, max_age_s: float, trees: int, rebuild_after: int,
                 stats: IndexStats | None = None) -> None:
        """`store`: the L1 store, or a data dir for the disk store (`<data_dir>/l1.sqlite`, `l1.index`)."""
        self.index = L1Index(store, max_entries=max_entries, max_age_s=max_age_s, trees=trees,
                             rebuild_after=rebuild_after, stats=stats)

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.index.running():
            yield

    @handles(L1Count)
    async def count(self, request: L1Count) -> int:
        return len(self.index)

    @handles(L1Rebuild)
    async def rebuild_now(self, request: L1Rebuild) -> int:
        await self.index.rebuild()
        return len(self.index)

    @handles(L1MayHold)
    async def may_hold(self, request: L1MayHold) -> bool:
        return self.index.may_hold(request.context)

    @handles(L1Lookup, concurrent=True)
    async def lookup(self, request: L1Lookup) -> list[Match]:
        return await self.index.lookup(request.vector, request.context, request.threshold, request.limit)

    @handles(L1Demote)
    async def demote(self, request: L1Demote) -> bool:
        return await self.index.demote(request.entry_id)

    @handles(L1Put)
    async def put(self, request: L1Put) -> int:
        return await self.index.put(new_entry(request))


def new_entry(request: L1Put) -> NewL1Entry:
    return NewL1Entry(request.context, request.embed_text, np.asarray(request.vector, np.float32), request.completion,
                      request.tier, request.task_type, request.confidence)
