"""L1 in Redis (cache.backend: redis): entries every daari on that Redis and prefix shares, and the stream that
tells each daari's vector index about new ones.

Keys under `<prefix>l1:`: `e:<id>` a hash per entry (context, embedded text, answer, tier, time), `d:<digest>` the id
of the entry for one prompt in one lookup context, `next` the id counter, and `log`, a stream with one record per
entry (id, context id, vector). A put is one Lua script, so it is atomic like a WATCH/MULTI transaction but in one
round trip and with no retry loop: when another daari stored the same prompt in the same context first, its id is
returned and nothing is written (no clobbering, no duplicate); otherwise the id is taken, the hash written, the
record appended, and the oldest entries past `max_entries` deleted with their records. Ids are seeded from Redis's
clock (ms x 1000), so a Redis that lost its data never hands out an id an index still holds for another entry.

Each daari keeps its own annoy index (actors/semantic_cache.py): built at start from the stream, then fed by
`follow` (XREAD BLOCK), so an entry another daari stored is searched here about one round trip after its put
(docs/redis.md, "Each instance's index, and the lag"; bench/redis_hit.py measures it). Eviction by age trims the
stream and the hashes; the index drops every id below the oldest one left (`Evicted.below`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
import trio

from daari import jsonio
from daari.cache.entry_codec import BadEntry, vector_from_bytes, vector_to_bytes
from daari.cache.l1_store import L1Entry, StoredVectors, context_id
from daari.cache.redis_link import Client, RedisLink
from daari.cache.store import Evicted, L1Shape, NewL1Entry, StoreUnavailable, VectorRows
from daari.protocol.chat import Completion
from daari.semantic.minilm import DIMENSIONS

log = logging.getLogger("daari.l1")

PAGE = 1000  # stream records read per round trip at start
BLOCK_MS = 5000  # a follower's XREAD waits this long for new records, then asks again
LOAD_TIMEOUT_S = 30.0  # one page of the start-up read

DEMOTE = """
local digest = redis.call('HGET', KEYS[1], 'dedupe')
if digest then redis.call('DEL', digest) end
return redis.call('DEL', KEYS[1])
"""

# Deletes one entry: its hash, its dedupe key, its stream record. `local` functions share one script body.
_DROP = """
local function drop(prefix, stream, record)
  local fields = record[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'id' then
      local key = prefix .. fields[i + 1]
      local digest = redis.call('HGET', key, 'dedupe')
      if digest then redis.call('DEL', digest) end
      redis.call('DEL', key)
    end
  end
  redis.call('XDEL', stream, record[1])
end
local function trim_count(prefix, stream, max_entries)
  local over = redis.call('XLEN', stream) - max_entries
  if over > 0 then
    for _, record in ipairs(redis.call('XRANGE', stream, '-', '+', 'COUNT', over)) do drop(prefix, stream, record) end
  end
end
"""

# KEYS: next, dedupe, stream. ARGV: entry prefix, ttl ms, max entries, context, context id, embedded text, vector,
# completion, tier, task type, confidence, created (s). Returns {1, id} when stored, {0, id} when it existed.
PUT = _DROP + """
local existing = redis.call('GET', KEYS[2])
if existing then return {0, tonumber(existing)} end
local now = redis.call('TIME')
redis.call('SET', KEYS[1], tonumber(now[1]) * 1000000 + math.floor(tonumber(now[2]) / 1000) * 1000, 'NX')
local id = string.format('%d', redis.call('INCR', KEYS[1]))  -- concatenating a Lua number would write 1.7e+15
local key = ARGV[1] .. id
redis.call('HSET', key, 'context', ARGV[4], 'embed', ARGV[6], 'completion', ARGV[8], 'tier', ARGV[9],
           'task_type', ARGV[10], 'confidence', ARGV[11], 'created', ARGV[12], 'dedupe', KEYS[2])
redis.call('PEXPIRE', key, ARGV[2])
redis.call('SET', KEYS[2], id, 'PX', ARGV[2])
redis.call('XADD', KEYS[3], '*', 'id', id, 'ctx', ARGV[5], 'vec', ARGV[7])
trim_count(ARGV[1], KEYS[3], tonumber(ARGV[3]))
return {1, id}
"""

# KEYS: stream. ARGV: entry prefix, cutoff (ms since the epoch), max entries. Deletes entries older than the cutoff
# and past the count, at most 1000 a call; returns {deleted, id of the oldest entry left or -1}.
SWEEP = _DROP + """
local deleted = 0
for _, record in ipairs(redis.call('XRANGE', KEYS[1], '-', ARGV[2], 'COUNT', 1000)) do
  drop(ARGV[1], KEYS[1], record)
  deleted = deleted + 1
end
local before = redis.call('XLEN', KEYS[1])
trim_count(ARGV[1], KEYS[1], tonumber(ARGV[3]))
deleted = deleted + before - redis.call('XLEN', KEYS[1])
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local oldest = -1
if #first == 1 then
  local fields = first[1][2]
  for i = 1, #fields, 2 do if fields[i] == 'id' then oldest = tonumber(fields[i + 1]) end end
end
return {deleted, oldest}
"""

_FIELDS = ("context", "embed", "completion", "tier", "task_type", "confidence", "created")


class RedisL1:
    def __init__(self, link: RedisLink, prefix: str, *, max_entries: int, max_age_s: float) -> None:
        self.link = link
        self.prefix = prefix + "l1:"
        self.max_entries = max_entries
        self.max_age_s = max_age_s
        self.description = f"{link.settings.shown} {self.prefix}*"
        self.shape = L1Shape(index_path=None, shared=True)

    @property
    def stream(self) -> str:
        return self.prefix + "log"

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def put(self, entry: NewL1Entry) -> int:
        digest = hashlib.sha256(f"{entry.context}\0{entry.embed_text}".encode()).hexdigest()
        args: list[Any] = [
            self.prefix + "e:", int(self.max_age_s * 1000), self.max_entries, entry.context,
            str(context_id(entry.context)), entry.embed_text, vector_to_bytes(entry.vector),
            jsonio.dumps(entry.completion.to_json()), entry.tier, entry.task_type or "",
            "" if entry.confidence is None else repr(entry.confidence), repr(time.time())]
        keys = [self.prefix + "next", self.prefix + "d:" + digest, self.stream]

        async def put(client: Client) -> Any:
            return await client.register_script(PUT)(keys=keys, args=args)

        stored, entry_id = await self.link.run(put)
        return int(entry_id)

    async def get_many(self, ids: Sequence[int]) -> dict[int, L1Entry]:
        if not ids:
            return {}

        async def read(client: Client) -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                answers = [pipe.hmget(f"{self.prefix}e:{entry_id}", _FIELDS) for entry_id in ids]
            return [await answer for answer in answers]

        found: dict[int, L1Entry] = {}
        for entry_id, values in zip(ids, await self.link.run(read), strict=True):
            if values is None or values[0] is None:
                continue  # evicted or expired since the index saw it
            try:
                found[entry_id] = _entry(entry_id, values)
            except (BadEntry, KeyError, TypeError, ValueError) as exc:
                log.warning("L1 entry %d in Redis skipped: unreadable (%s)", entry_id, type(exc).__name__)
        return found

    async def vectors(self) -> VectorRows:
        """Every record of the stream, read a page per round trip."""
        ids: list[int] = []
        contexts: list[int] = []
        vectors: list[Any] = []
        position = "-"
        while True:
            page = await self.link.run(  # awaited here: the lambda never outlives this iteration's position
                lambda client: client.xrange(self.stream, position, "+", count=PAGE),  # noqa: B023
                timeout_s=LOAD_TIMEOUT_S)
            for record in page:
                _add(record.field_values, ids, contexts, vectors)
            if len(page) < PAGE:
                if page:
                    position = "(" + _text(page[-1].identifier)
                break
            position = "(" + _text(page[-1].identifier)
        last = position[1:] if position.startswith("(") else "0-0"
        return VectorRows(_stored(ids, contexts, vectors), position=last)

    async def evict(self, max_entries: int, max_age_s: float) -> Evicted:
        async def sweep(client: Client) -> Any:
            cutoff_ms = int((time.time() - max_age_s) * 1000)
            return await client.register_script(SWEEP)(keys=[self.stream],
                                                       args=[self.prefix + "e:", cutoff_ms, max_entries])

        _, oldest = await self.link.run(sweep)
        return Evicted(below=int(oldest))  # -1: the stream is empty, every id seen before this sweep is gone

    async def demote(self, entry_id: int) -> bool:
        # The hash and its dedupe key go (the stream record stays: an index that still holds the id finds no
        # entry, on every daari); the same prompt may then be stored again with a fresh answer.
        async def drop(client: Client) -> Any:
            return await client.register_script(DEMOTE)(keys=[f"{self.prefix}e:{entry_id}"], args=[])

        return int(await self.link.run(drop)) > 0

    async def count(self) -> int:
        return int(await self.link.run(lambda client: client.xlen(self.stream)))

    async def follow(self, position: str) -> AsyncIterator[VectorRows]:
        """From `position`, or ("") everything the stream holds first, read once Redis answers."""
        while not position:
            await self.link.wait_up()
            try:
                everything = await self.vectors()
            except StoreUnavailable:
                await trio.sleep(self.link.settings.reconnect_initial_s)
                continue
            position = everything.position
            yield everything
        while True:
            await self.link.wait_up()
            try:
                answer = await self.link.run(
                    lambda client: client.xread({self.stream: position}, count=PAGE, block=BLOCK_MS),  # noqa: B023
                    timeout_s=BLOCK_MS / 1000 + self.link.settings.timeout_s + 1.0, blocking=True)
            except StoreUnavailable:
                await trio.sleep(self.link.settings.reconnect_initial_s)  # down: wait_up holds; refused: slow down
                continue
            if not answer:
                continue
            ids: list[int] = []
            contexts: list[int] = []
            vectors: list[Any] = []
            for records in answer.values():
                for record in records:
                    _add(record.field_values, ids, contexts, vectors)
                    position = _text(record.identifier)
            yield VectorRows(_stored(ids, contexts, vectors), position=position)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _add(fields: Any, ids: list[int], contexts: list[int], vectors: list[Any]) -> None:
    try:
        vector = vector_from_bytes(fields[b"vec"])
        entry_id, ctx = int(fields[b"id"]), int(fields[b"ctx"])
    except (KeyError, ValueError, BadEntry):
        return  # not a record of this version: skipped
    ids.append(entry_id)
    contexts.append(ctx)
    vectors.append(vector)


def _stored(ids: list[int], contexts: list[int], vectors: list[Any]) -> StoredVectors:
    matrix = np.vstack(vectors).astype(np.float32) if vectors else np.zeros((0, DIMENSIONS), np.float32)
    return StoredVectors(np.array(ids, np.int64), np.array(contexts, np.int64), matrix)


def _entry(entry_id: int, values: Sequence[bytes | None]) -> L1Entry:
    context, embed, completion, tier, task_type, confidence, created = (
        v.decode() if v is not None else "" for v in values)
    return L1Entry(entry_id, context, embed, Completion.from_json(jsonio.loads(completion)), tier, float(created),
                   task_type or None, float(confidence) if confidence else None)
