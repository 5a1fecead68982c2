"""A chat request's L0 key: from the key memo when the same bytes came before, else worked out and
remembered (on a worker thread for a large body). See cache/key_memo.py for why the bytes determine the key."""

from __future__ import annotations

from daari.cache.key_memo import MemoKey, memo_key
from daari.pipeline.chat import ChatTurn
from daari.pipeline.runtime import Runtime


def request_key(rt: Runtime, turn: ChatTurn, found_by: MemoKey | None) -> str:
    """For a small body, inline. `found_by`: the body's memo key (`memo_key`), or None when the body was
    rewritten before parsing (then it is not remembered)."""
    if found_by is None:
        return turn.cache_key()
    key = rt.key_memo.get(found_by)
    if key is None:
        key = turn.cache_key()
        rt.key_memo.put(found_by, key)
    return key


async def request_key_off_loop(rt: Runtime, turn: ChatTurn, raw: bytes | None) -> str:
    """For a large body: hashing it and working out its key are each worth a worker thread. The memo itself is
    only ever touched on the event loop."""
    if raw is None:
        return await rt.body_work.run(turn.cache_key)
    found_by = await rt.body_work.run(memo_key, raw, turn.wire.name, turn.controls.tier_override, turn.partition)
    key = rt.key_memo.get(found_by)
    if key is None:
        key = await rt.body_work.run(turn.cache_key)
        rt.key_memo.put(found_by, key)
    return key
