"""How many live L1 entries each lookup context holds.

L1 matches only within a lookup context (semantic/context.py), so a request whose context holds no entry cannot
be an L1 hit: L1 answers it as a miss without running the embedding model (pipeline/steps/l1.py). An agent's
tool loop carries its tool results in the context, so nearly every turn of it is such a request.
"""

from __future__ import annotations

from collections.abc import Iterable


class ContextCensus:
    """Live entries by context id (cache/l1_store.py `context_id`), kept by the vector index that holds them
    (semantic/index.py `VectorIndex`) as entries come and go."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}

    def may_hold(self, context_id: int) -> bool:
        """False only when no live entry has this context id: a certain L1 miss. Ids are 60 bits of the context's
        hash, so another context's entries (a collision) or entries past their age not yet swept can make it
        True for nothing: the lookup then runs as it always did."""
        return context_id in self._counts

    def add(self, context_ids: Iterable[int]) -> None:
        counts = self._counts
        for context in context_ids:
            counts[context] = counts.get(context, 0) + 1

    def remove(self, context_ids: Iterable[int]) -> None:
        counts = self._counts
        for context in context_ids:
            left = counts.get(context, 0) - 1
            if left > 0:
                counts[context] = left
            else:
                counts.pop(context, None)

    def __len__(self) -> int:
        """Contexts holding at least one live entry."""
        return len(self._counts)
