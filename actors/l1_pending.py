"""Answers the local L1 was told to store before it has their embedding (their lookup ran no model).

Until each one is stored, its context counts as held (`holds`), and a lookup in that context waits for it
(`wait`, briefly): a request sent after an answer's reply finds the answer as if it had been stored at once.
"""

from __future__ import annotations

import trio


class PendingPuts:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # beyond this many waiting, an answer is not stored (L1 is a cache)
        self._by_context: dict[str, list[trio.Event]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def holds(self, context: str) -> bool:
        return context in self._by_context

    def add(self, context: str) -> trio.Event | None:
        """Register one answer of `context`; None when too many are waiting (it is then not stored)."""
        if self._count >= self.limit:
            return None
        event = trio.Event()
        self._by_context.setdefault(context, []).append(event)
        self._count += 1
        return event

    def done(self, context: str, event: trio.Event) -> None:
        """The answer is stored, or will never be: lookups waiting for it go on."""
        waiting = self._by_context.get(context)
        if waiting is None or event not in waiting:
            return
        waiting.remove(event)
        if not waiting:
            del self._by_context[context]
        self._count -= 1
        event.set()

    async def wait(self, context: str, timeout_s: float) -> None:
        """Until every answer of `context` registered so far is stored, or `timeout_s` passed."""
        waiting = list(self._by_context.get(context, ()))
        with trio.move_on_after(timeout_s):
            for event in waiting:
                await event.wait()
