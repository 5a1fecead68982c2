"""A least-recently-used map bounded by the sizes of its values: L0's in-memory front and the hit lane's parsed
requests (sized in bytes), the key memo and L1's pending probes (each of size 1: bounded in count).

Each value is put with its size; the oldest values go once the sizes add up past `max_bytes`. A value
larger than the whole budget is not kept at all (it would evict everything else). Hand-written rather than
cachetools' LRUCache: a hit costs two or three of these lookups, and cachetools' `get` measured 2.7x this one's
(docs/architecture.md, "Libraries and why").
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: K, value: V, size: int) -> None:
        self.pop(key)
        if size > self.max_bytes:
            return
        self._items[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, evicted) = self._items.popitem(last=False)
            self.bytes -= evicted

    def pop(self, key: K) -> V | None:
        item = self._items.pop(key, None)
        if item is None:
            return None
        self.bytes -= item[1]
        return item[0]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
