"""The hit lane: a request whose exact bytes were answered from L0 before, and whose answer is in L0's memory
now, is answered with a remembered parse of those bytes (cache/hit_requests.py) instead of a new one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from daari.cache.key_memo import MemoKey
from daari.cache.l0_store import L0Entry
from daari.pipeline.runtime import Runtime
from daari.protocol.chat import ChatRequest
from daari.protocol.wire import Wire


@dataclass(slots=True)
class RememberedHit:
    request: ChatRequest  # this caller's copy: its own headers and query string
    key: str
    entry: L0Entry  # the answer, taken from memory now: the request is answered from it with no await between


def remembered_hit(rt: Runtime, wire: Wire, found_by: MemoKey, headers: Mapping[str, str],
                   query_string: str) -> RememberedHit | None:
    """The hit for these bytes, or None (never seen as a hit, or its answer is no longer in memory): then the
    request is parsed and routed as usual, and may still be an L0 hit from disk."""
    remembered = rt.hit_requests.get(found_by)
    if remembered is None:
        return None
    key = rt.key_memo.get(found_by)
    entry = rt.l0_memory.peek(key) if key is not None else None
    if key is None or entry is None:
        return None
    return RememberedHit(remembered.for_caller(wire.passthrough(headers), query_string), key, entry)
