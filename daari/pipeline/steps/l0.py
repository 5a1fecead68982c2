"""Routing spec step 3: the exact cache (L0). Reads: the body bytes, `turn.controls`, `turn.partition`, the parsed
request. Decides: `turn.key` and, when L0 holds this request, the answer (classified as it was when stored).

The hit lane is its fast path: bytes answered from L0's memory before, whose answer is in memory now, are
answered with the remembered parse of those bytes (cache/hit_requests.py, a copy with this caller's headers):
no decode, no validation, no key work. Otherwise the request is parsed, its key found in the key memo by the
bytes or worked out (on a worker thread for a large body), and L0's memory peeked once; a memory miss asks the
CacheActor (its disk) through the CacheGuard, which bypasses a failing cache. Nothing here waits on anything
outside daari, so a hit needs no client watch.
"""

from __future__ import annotations

from daari.cache.hit_requests import HitRequests
from daari.cache.key_memo import L0KeyMemo, MemoKey, memo_key
from daari.cache.l0_key import l0_key
from daari.cache.l0_memory import L0Memory
from daari.cache.l0_store import L0Entry
from daari.errors import NotFound
from daari.pipeline.body_work import BodyWork
from daari.pipeline.cache_guard import CacheGuard
from daari.pipeline.step import Answer
from daari.pipeline.steps.parse import ParseStep
from daari.pipeline.turn import Turn
from daari.protocol.chat import ChatRequest


class L0Step:
    name = "L0"

    def __init__(self, *, memory: L0Memory, guard: CacheGuard, key_memo: L0KeyMemo, hit_requests: HitRequests,
                 body_work: BodyWork, parse: ParseStep, org_after: bool = False) -> None:
        self.memory = memory  # peeked synchronously: the CacheActor is its only writer
        self.guard = guard
        self.key_memo = key_memo
        self.hit_requests = hit_requests
        self.body_work = body_work
        self.parse = parse
        # The org cache's L0-org follows (steps/org.py): an `X-Daari-Tier-Override: L0` miss here is its to refuse.
        self.org_after = org_after

    async def __call__(self, turn: Turn) -> Answer | None:
        if not turn.cache_on:
            if turn.controls.tier_override == "L0":
                await self.parse(turn)  # a bad body is refused first, as on every other path
                override_missed(turn)
            return None
        found_by: MemoKey | None = None  # the body's memo key, when the bytes as received are the request
        if turn.prepare is None and not self.body_work.heavy(turn.request_bytes):
            found_by = memo_key(turn.raw, turn.wire.name, turn.controls.keyed_override, turn.partition)
            answer = self._lane(turn, found_by)
            if answer is not None:
                return answer
        await self.parse(turn)
        turn.key = await self._key(turn, found_by)
        entry = self.memory.peek(turn.key)
        if entry is not None:
            if found_by is not None:  # the next copy of these bytes takes the hit lane
                self.hit_requests.put(found_by, turn.request, turn.request_bytes)
            return _hit(turn, entry)
        entry = await self.guard.read(turn.key, turn.meta)
        if entry is not None:
            return _hit(turn, entry)
        if not self.org_after:
            override_missed(turn)
        return None

    def _lane(self, turn: Turn, found_by: MemoKey) -> Answer | None:
        remembered = self.hit_requests.get(found_by)
        if remembered is None:
            return None
        key = self.key_memo.get(found_by)
        entry = self.memory.peek(key) if key is not None else None
        if key is None or entry is None:
            return None  # its answer left memory: parsed and looked up as usual (it may be on disk)
        # The copy is answered from `entry` with no await in between (cache/hit_requests.py says why).
        turn.request = remembered.for_caller(turn.wire.passthrough(turn.headers), turn.query_string)
        turn.key = key
        return _hit(turn, entry)

    async def _key(self, turn: Turn, found_by: MemoKey | None) -> str:
        """From the key memo when the same bytes came before, else worked out and remembered. A large body is
        hashed and keyed on a worker thread; the memo itself is only touched on the event loop."""
        work = self.body_work
        heavy = work.heavy(turn.request_bytes)
        if found_by is None and heavy and turn.prepare is None:
            found_by = await work.run(memo_key, turn.raw, turn.wire.name,
                                      turn.controls.keyed_override, turn.partition)
        if found_by is None:  # the body was rewritten before parsing: its bytes are not the request
            return await work.run(_digest, turn.request, turn) if heavy else _digest(turn.request, turn)
        key = self.key_memo.get(found_by)
        if key is None:
            key = await work.run(_digest, turn.request, turn) if heavy else _digest(turn.request, turn)
            self.key_memo.put(found_by, key)
        return key


def _digest(request: ChatRequest, turn: Turn) -> str:
    """The L0 key (normalize + canonical JSON + SHA-256): pure, so it may run on a worker thread."""
    return l0_key(request, turn.controls.keyed_override, turn.partition).digest


def _hit(turn: Turn, entry: L0Entry) -> Answer:
    meta = turn.meta
    meta.cache_hit, meta.cache = True, "hit"
    # The classification made when the answer was stored: a hit does not classify again.
    meta.task_type, meta.rule_id, meta.ceiling = entry.task_type, entry.rule_id, entry.ceiling
    meta.agent_turn = entry.agent_turn  # the same key is the same request: no need to scan its prompt again
    completion = entry.completion
    return Answer("L0", "cache", completion, turn.wire.replay(completion, turn.request.stream), entry.confidence)


def override_missed(turn: Turn) -> None:
    """`X-Daari-Tier-Override: L0` with no entry for the request is a 404, not a routed request."""
    if turn.controls.tier_override == "L0":
        raise NotFound("X-Daari-Tier-Override: L0 was asked for and there is no cached answer for this request "
                       "(locally, or in the org cache where one is configured); send it without that header to have "
                       "it answered", code="l0_miss")
