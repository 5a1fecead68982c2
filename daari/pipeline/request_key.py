"""A chat request's L0 key: from the key memo when the same bytes came before, else worked out (on a worker
thread for a large body) and remembered. See cache/key_memo.py for why the bytes determine the key."""

from __future__ import annotations

from daari.cache.key_memo import memo_key
from daari.pipeline.chat import ChatTurn
from daari.pipeline.runtime import Runtime


async def request_key(rt: Runtime, turn: ChatTurn, raw: bytes | None, heavy: bool) -> str:
    """`raw`: the body as received, or None when it was rewritten before parsing (then it is not remembered)."""
    if raw is None:
        return await rt.body_work.run(turn.cache_key) if heavy else turn.cache_key()
    args = (raw, turn.wire.name, turn.controls.tier_override, turn.partition)
    # Hashing a large body is itself worth a thread; the memo is only ever touched here, on the event loop.
    found_by = await rt.body_work.run(memo_key, *args) if heavy else memo_key(*args)
    key = rt.key_memo.get(found_by)
    if key is None:
        key = await rt.body_work.run(turn.cache_key) if heavy else turn.cache_key()
        rt.key_memo.put(found_by, key)
    return key
