"""Parsed requests of L0 hits, by their exact bytes: a body answered from L0 and sent again is answered again
without decoding and validating it (on a hit that is most of daari's own work on the request).

Keyed like the key memo (cache/key_memo.py: protocol, tier override, credential partition and a digest of the
bytes), because the parsed body is a pure function of the bytes; only `passthrough_headers` and the query string
come from elsewhere, and each caller gets a copy with its own (`ChatRequest.for_caller`). The messages, tools and
body under the copies are shared, so only the hit path may use one: the L0 step's hit lane (pipeline/steps/l0.py)
hands one out only when the request's answer is in L0's memory right then, and answers from that entry with
nothing in between. A miss
always parses its own request, so the routing pipeline never holds a shared one. Bounded by the bytes of the
bodies the requests came from; least recently used first out.
"""

from __future__ import annotations

from daari.cache.key_memo import MemoKey
from daari.cache.lru import LRU
from daari.protocol.chat import ChatRequest

DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # of request bodies; a parsed request takes a few times its body in memory


class HitRequests:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._requests: LRU[MemoKey, ChatRequest] = LRU(max_bytes)

    def get(self, found_by: MemoKey) -> ChatRequest | None:
        return self._requests.get(found_by)

    def put(self, found_by: MemoKey, request: ChatRequest, body_bytes: int) -> None:
        """Remember a hit's parsed request, without its caller's headers (no credential is kept here)."""
        self._requests.put(found_by, request.for_caller({}, ""), body_bytes)

    @property
    def body_bytes(self) -> int:
        return self._requests.bytes

    def __len__(self) -> int:
        return len(self._requests)
