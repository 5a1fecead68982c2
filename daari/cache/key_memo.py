"""L0 keys remembered by the request's exact bytes: a body sent again (agents and retries resend them as is)
gets its key without normalizing and canonicalizing the request again.

Sound because the L0 key is a pure function of the parsed body, the tier override and the credential
partition, and the parsed body of a route is a pure function of its bytes (headers only reach
`passthrough_headers`, which is not in the key). So the memo is keyed by all four: the route's protocol, the
override, the partition and a BLAKE2b digest of the bytes. Bodies rewritten before parsing (a Responses
`previous_response_id` pulls in stored turns) are not remembered. Bounded, least recently used first out.
"""

from __future__ import annotations

import hashlib

from daari.cache.lru import LRU

MemoKey = tuple[str, str, str, bytes]

DEFAULT_ENTRIES = 4096  # ~1 MB at most: a tuple, a 16-byte digest and a 64-character key each


def memo_key(raw: bytes, protocol: str, tier_override: str | None, partition: str) -> MemoKey:
    # 128 bits: a collision would need 2^64 distinct bodies, and it would only ever mix up two of this
    # process's own requests under the same partition.
    return protocol, tier_override or "", partition, hashlib.blake2b(raw, digest_size=16).digest()


class L0KeyMemo:
    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        self.max_entries = max_entries
        self._keys: LRU[MemoKey, str] = LRU(max_entries)  # each of size 1: bounded in count

    def get(self, key: MemoKey) -> str | None:
        return self._keys.get(key)

    def put(self, key: MemoKey, digest: str) -> None:
        self._keys.put(key, digest, 1)

    def __len__(self) -> int:
        return len(self._keys)
