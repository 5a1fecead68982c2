"""SemanticCacheActor: the local L1, one vector index (actors/l1_index.py: annoy + an exact buffer) over the L1
store (SQLite, or Redis shared with other daari), and the messages L1 is asked with. The index keeps a census of
its entries by context (semantic/census.py), asked with `L1MayHold`; an answer whose lookup ran no model is
embedded here, after its reply (`L1EmbedAndPut`, actors/l1_pending.py)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trio

from actors.embedder import Embed, Embedding
from actors.l1_index import IndexStats, L1Index, Match
from actors.l1_pending import PendingPuts
from actors.runtime import Actor, ActorFault, Address, Call, handles
from daari.cache.store import L1Backend, NewL1Entry
from daari.errors import DaariError
from daari.protocol.chat import Completion
from daari.semantic.index import Vector

__all__ = ["IndexStats", "L1Count", "L1Demote", "L1EmbedAndPut", "L1Lookup", "L1MayHold", "L1Put", "L1Rebuild",
           "Match", "SemanticCacheActor"]

log = logging.getLogger("daari.l1")

PENDING_PUTS = 256  # answers waiting for their embedding beyond this are not stored
PENDING_WAIT_S = 1.0  # longest a lookup waits for its context's pending answers (a model run is ~5-50 ms)


@dataclass(frozen=True)
class L1Lookup(Call[list[Match]]):
    """Candidates for `vector` within `context`, nearest first."""

    vector: Vector
    context: str
    threshold: float
    limit: int = 3


@dataclass(frozen=True)
class L1MayHold(Call[bool]):
    """Whether any entry may share `context`; False is a certain miss (the index's census, semantic/census.py, and
    the answers still waiting for their embedding). Asked through the mailbox, after every put told before it: an
    answer told before a request was sent is counted for it."""

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
class L1EmbedAndPut(Call[bool]):
    """Store an answer whose lookup ran no model (its context held no entry): `embed_text` (what the model reads of
    the request) is embedded first, after the reply. Its context counts as held from now on, and lookups in it
    wait for it. The reply: whether it was taken (False: too many waiting, it is not stored)."""

    context: str
    embed_text: str
    completion: Completion
    tier: str


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
                 stats: IndexStats | None = None, embedder: Address | None = None) -> None:
        """`store`: the L1 store, or a data dir for the disk store (`<data_dir>/l1.sqlite`, `l1.index`);
        `embedder`: the EmbedderActor, for `L1EmbedAndPut` (None: such answers are not stored)."""
        self.index = L1Index(store, max_entries=max_entries, max_age_s=max_age_s, trees=trees,
                             rebuild_after=rebuild_after, stats=stats)
        self.embedder = embedder
        self.pending = PendingPuts(PENDING_PUTS)
        self._embedding: trio.Nursery | None = None

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.index.running(), trio.open_nursery() as embedding:
            self._embedding = embedding
            yield
            embedding.cancel_scope.cancel()  # answers still waiting for their embedding are not stored

    @handles(L1Count)
    async def count(self, request: L1Count) -> int:
        return len(self.index)

    @handles(L1Rebuild)
    async def rebuild_now(self, request: L1Rebuild) -> int:
        await self.index.rebuild()
        return len(self.index)

    @handles(L1MayHold)
    async def may_hold(self, request: L1MayHold) -> bool:
        return self.pending.holds(request.context) or self.index.may_hold(request.context)

    @handles(L1Lookup, concurrent=True)
    async def lookup(self, request: L1Lookup) -> list[Match]:
        if self.pending.holds(request.context):
            await self.pending.wait(request.context, PENDING_WAIT_S)
        return await self.index.lookup(request.vector, request.context, request.threshold, request.limit)

    @handles(L1EmbedAndPut)
    async def embed_and_put(self, request: L1EmbedAndPut) -> bool:
        """Serial, and quick: the context counts as held before the next message is read; the model run and the
        put happen in the background."""
        if self.embedder is None or self._embedding is None:
            return False
        waiting = self.pending.add(request.context)
        if waiting is None:
            log.debug("L1 write dropped: %d answers already wait for their embedding", len(self.pending))
            return False
        self._embedding.start_soon(self._embed_then_put, request, waiting)
        return True

    async def _embed_then_put(self, request: L1EmbedAndPut, waiting: trio.Event) -> None:
        assert self.embedder is not None
        try:
            embedding: Embedding = await self.embedder.call(Embed(request.embed_text))
            await self.index.put(NewL1Entry(request.context, request.embed_text, embedding.vector,
                                            request.completion, request.tier))
        except (DaariError, ActorFault) as err:  # the model or the store failed: not indexed, L1 goes on
            log.warning("L1 write skipped: %s", err)
        finally:
            self.pending.done(request.context, waiting)

    @handles(L1Demote)
    async def demote(self, request: L1Demote) -> bool:
        return await self.index.demote(request.entry_id)

    @handles(L1Put)
    async def put(self, request: L1Put) -> int:
        return await self.index.put(new_entry(request))


def new_entry(request: L1Put) -> NewL1Entry:
    return NewL1Entry(request.context, request.embed_text, np.asarray(request.vector, np.float32), request.completion,
                      request.tier, request.task_type, request.confidence)
