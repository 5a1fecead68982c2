"""Routing spec step 5, the semantic cache tier (L1): the nearest stored prompt by embedding, served only when the
verifier agrees. Reads: what the model would see of the request (semantic/fold.py) and its exact lookup context.
Decides: a verified stored answer, the candidates it rejected (each a false hit avoided), or a miss.

`answer` folds the request (daari/semantic/fold.py), embeds what the model can see, searches entries with
the same lookup context, and asks the verifier about the nearest candidates above the threshold; the first
one it accepts is served. Every rejection counts as a false hit avoided. The embedding of a miss is kept
(by L0 key) and reused by `remember`, which stores the answer the request got: a miss embeds once. Recent
embeddings are also kept by text (`embed_memo_mb`): an agent's tool loop repeats its last user turn on every
turn, and the probe of each turn after the first then costs no model run.
A request whose lookup context holds no entry (the index's census, semantic/census.py) cannot be a hit: it is a
miss without the model run; only an answer that is stored (never a tool call) is embedded, by the SemanticCacheActor
after the reply. An agent's tool loop carries its tool results in the context, so nearly every turn of it is such a
miss, and most of its answers are tool calls: no model run at all.
Agent turns take part through the stable prefix (ADR-0004 G1b); answers that are tool calls never do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from actors.embedder import Embed, EmbedderStatus, Embedding, Window
from actors.runtime import Address
from actors.semantic_cache import IndexStats, L1EmbedAndPut, L1Lookup, L1MayHold, L1Put, Match
from actors.verifier import Verify
from daari.cache.lru import LRU
from daari.config import L1Config
from daari.errors import DaariError
from daari.metrics import Metrics
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.protocol.chat import Completion
from daari.semantic.context import lookup_context
from daari.semantic.fold import Fold, fold
from daari.semantic.index import Vector
from daari.semantic.lexical import Verdict
from daari.semantic.minilm import fits_whole
from daari.trust.bars import LearnedBars

log = logging.getLogger("daari.l1")

STORABLE = ("stop", "length", "stop_sequence")  # never "tool_calls": a tool call is not an answer to reuse
PENDING = 1024  # misses whose embedding waits for their answer
MEMO_ENTRY_OVERHEAD = 200  # bytes a memo entry costs beyond its text and vector (objects, the LRU's slot)


def _missed() -> ShortcutResult:
    """L1 looked the request up and found no candidate (or its context held no entry): `daari_meta.l1: "miss"`,
    so the lookup is counted (`daari_cache_lookups_total`, `daari report`) like one whose candidates were rejected."""
    return ShortcutResult("L1", None, details={"l1": "miss"})


@dataclass(frozen=True)
class Probe:
    """A request as L1 sees it: the text the model read, its vector (None: not embedded, its context held no
    entry), and the exact lookup context."""

    text: str
    vector: Vector | None
    context: str


class SemanticTier:
    name = "L1"
    serves_agent_turns = True  # the agent-prefix L1 (ADR-0004 G1b)
    asks_census = True  # whether the index may hold the request's context, before the model runs (L1MayHold)

    def __init__(self, config: L1Config, embedder: Address, status: EmbedderStatus, cache: Address,
                 verifier: Address, metrics: Metrics, index_stats: IndexStats | None = None,
                 bars: LearnedBars | None = None, memo_of: SemanticTier | None = None) -> None:
        self.config = config
        self.embedder = embedder
        self.status = status
        self.cache = cache
        self.verifier = verifier
        self.metrics = metrics
        self._pending: LRU[str, Probe] = LRU(PENDING)  # each of size 1: bounded in count
        memo_bytes = int(config.embed_memo_mb * 2**20)
        self._memo: LRU[tuple[str, str], Embedding] | None = LRU(memo_bytes) if memo_bytes else None
        # How much of a text the model reads, by partition and text: a tool loop's later turns ask the census
        # without the tokenizer's round trip (their user turn is the first turn's, embedded only if stored).
        self._windows: LRU[tuple[str, str], int] | None = LRU(memo_bytes) if memo_bytes else None
        if memo_of is not None:  # another tier over the same embedder (L1-org after L1): one model run a text
            self._memo = memo_of._memo
        self.index_stats = index_stats  # what the index holds (the SemanticCacheActor updates it), for /healthz
        self.bars = bars  # learned similarity bars per task type (the ShadowActor refits them); None: the threshold

    def health(self) -> dict[str, Any]:
        """For GET /healthz: whether L1 can answer now, and why not."""
        state = "ready" if self.status.ready else ("unavailable" if self.status.error else "loading")
        stats = self.index_stats
        return {"state": state, "error": self.status.error, "load_seconds": self.status.load_seconds,
                "entries": stats.entries if stats is not None else None}

    async def _probe(self, query: ShortcutQuery) -> Probe | None:
        folded = fold(query.request)
        text = folded.embed_text
        if not text:
            return None
        # A text in the memo costs no model run, and its vector lets `remember` store without one: searched as is.
        if self.asks_census and (self._memo is None or (query.partition, text) not in self._memo):
            seen = await self._window(text, query.partition)
            context = self._context(query, folded, seen)
            if not await self.cache.call(L1MayHold(context)):
                self.metrics.inc("cache_l1_misses_without_model_total")
                return Probe(text[:seen], None, context)
        embedding = await self._embedding(text, query.partition)
        seen = embedding.seen_chars
        return Probe(text[:seen], embedding.vector, self._context(query, folded, seen))

    async def _window(self, text: str, partition: str) -> int:
        """How many leading characters of `text` the model reads (the tokenizer, no model run), remembered."""
        if fits_whole(text):
            return len(text)
        windows = self._windows
        key = (partition, text)
        seen = windows.get(key) if windows is not None else None
        if seen is None:
            seen = await self.embedder.call(Window(text))
            if windows is not None:
                windows.put(key, seen, len(text) + MEMO_ENTRY_OVERHEAD)
        return seen

    @staticmethod
    def _context(query: ShortcutQuery, folded: Fold, seen: int) -> str:
        return lookup_context(query.request, folded, query.partition, folded.embed_text[seen:])

    async def _embedding(self, text: str, partition: str) -> Embedding:
        """The model's embedding of `text`, from the memo when the same text was embedded lately in the same cache
        partition (the model is deterministic: the same vector up to float rounding, the same `seen_chars`).
        By partition: a faster answer must not tell one credential that another sent the same text."""
        memo = self._memo
        key = (partition, text)
        found = memo.get(key) if memo is not None else None
        if found is not None:
            self.metrics.inc("cache_l1_embed_memo_hits_total")
            return found
        embedding: Embedding = await self.embedder.call(Embed(text))
        if memo is not None:  # a copy: the vector is a row of its batch's matrix, which it would keep alive
            kept = Embedding(embedding.vector.copy(), embedding.seen_chars)
            memo.put(key, kept, len(text) + kept.vector.nbytes + MEMO_ENTRY_OVERHEAD)
        return embedding

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        if not query.l0_key:
            return None  # the cache is off for this request: L1 neither reads nor stores
        if not self.status.ready:  # loading (or failed to load: the log says why)
            reason = "unavailable" if self.status.error else "skipped_loading"
            return ShortcutResult("L1", None, details={"l1": reason})
        try:
            probe = await self._probe(query)
            if probe is None:
                return None
            self._remember_probe(query.l0_key, probe)
            if probe.vector is None:  # its context holds no entry: nothing to search
                return _missed()
            threshold = (self.bars.threshold(query.task_type) if self.bars is not None
                         else self.config.similarity_threshold)
            matches = await self._search(query, L1Lookup(probe.vector, probe.context, threshold))
            if matches is None:  # the index is not ready for this request: a miss, never a wait
                return ShortcutResult("L1", None, details={"l1": "index_loading"})
            rejected: list[tuple[Match, Verdict]] = []
            for match in matches:
                verdict: Verdict = await self.verifier.call(Verify(probe.text, match.entry.embed_text,
                                                                   match.similarity))
                if verdict.same:
                    return self._hit(match, rejected)
                rejected.append((match, verdict))
                self.metrics.inc("cache_false_hits_avoided_total")
                self.metrics.inc("cache_l1_rejections_total", rule=verdict.rule or "unknown")
        except DaariError as err:  # L1 failing never fails the request: it routes on as a miss
            log.warning("L1 lookup skipped: %s", err.message)
            return ShortcutResult("L1", None, details={"l1": "unavailable"})
        if not rejected:
            return _missed()
        best, verdict = rejected[0]
        draft = self._draft(best)
        return ShortcutResult("L1", None, draft=draft, details={
            "l1": "rejected", "verdict": "rejected", "similarity": round(best.similarity, 4), "l1_rejected": [
            {"entry_id": m.entry.id, "similarity": round(m.similarity, 4), "rule": v.rule} for m, v in rejected],
            "verified_by": self.config.verify, **({"draft_from": best.entry.id} if draft is not None else {})})

    async def _search(self, query: ShortcutQuery, lookup: L1Lookup) -> list[Match] | None:
        """The index's candidates (None: its index cannot answer this request yet). One index here; L1-org's
        tier (steps/org.py) asks the index of the request's tenant."""
        matches: list[Match] = await self.cache.call(lookup)
        return matches

    def _store(self, query: ShortcutQuery, put: L1Put) -> bool:
        """Tell the index to store `put`; False when its mailbox is full."""
        return self.cache.tell(put)

    def _draft(self, best: Match) -> str | None:
        """With cache.l1.draft_injection: the nearest rejected candidate's answer, shown to the model as a draft."""
        completion = best.entry.completion
        if not self.config.draft_injection or completion.tool_calls or not completion.text.strip():
            return None
        return completion.text

    def _hit(self, match: Match, rejected: list[tuple[Match, Verdict]]) -> ShortcutResult:
        details: dict[str, Any] = {"similarity": round(match.similarity, 4), "verified_by": self.config.verify,
                                   "entry_id": match.entry.id, "verdict": "accepted"}
        if rejected:
            details["l1_rejected"] = [{"entry_id": m.entry.id, "similarity": round(m.similarity, 4), "rule": v.rule}
                                      for m, v in rejected]
        confidence = match.entry.confidence if match.entry.confidence is not None else 1.0
        return ShortcutResult("L1", match.entry.completion, confidence=confidence, task_type="cache_hit",
                              details=details, cache_hit=True)

    def _remember_probe(self, key: str, probe: Probe) -> None:
        self._pending.put(key, probe, 1)

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        """Index the answer a model tier gave (just stored in L0) with the embedding its lookup made; a lookup that
        ran no model (its context held no entry) has its text embedded by the SemanticCacheActor after the reply.

        Never waits: the write is told to the SemanticCacheActor, before the answer's last bytes go out, so a
        request sent after it finds it. Without a lookup (a tier override, whose answers L0 also keeps apart, or
        the model still loading) nothing is indexed.
        """
        probe = self._pending.pop(query.l0_key) if query.l0_key else None
        if probe is None or completion.tool_calls or completion.finish_reason not in STORABLE:
            return
        vector = probe.vector
        if vector is None and self._memo is not None:  # the text is what the model reads: its vector, if in memo
            remembered = self._memo.get((query.partition, probe.text))
            vector = remembered.vector if remembered is not None else None
        told = (self._store(query, L1Put(probe.context, probe.text, vector, completion, tier)) if vector is not None
                else self.cache.tell(L1EmbedAndPut(probe.context, probe.text, completion, tier)))
        if not told:
            log.warning("L1 write dropped: the l1 actor's mailbox is full")
