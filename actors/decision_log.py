"""DecisionLogActor: the one writer of the decision log; a decision hub subscriber that writes in batches.

It never slows a request: attached to the hub, it turns each decision into its row at once and queues it,
bounded; when it falls behind (`buffer` rows waiting) further decisions are dropped and counted until it takes
the batch, and the hub counts it as a dropped subscriber. A channel and a task wake-up per decision cost more.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from actors.hub import Hub
from daari.observe.decision_log import DecisionLogStore, Values

log = logging.getLogger("daari.decision_log")

PRUNE_EVERY_S = 600.0


class DecisionLogActor:
    def __init__(self, path: Path, hub: Hub[Any], to_row: Callable[[Any], Values], *,
                 buffer: int, batch: int, retention_s: float, max_rows: int, flush_s: float = 0.0,
                 on_dropped: Callable[[int], None] | None = None) -> None:
        self.path = path
        self.hub = hub
        self.to_row = to_row
        self.buffer = buffer
        self.batch = batch
        self.retention_s = retention_s
        self.max_rows = max_rows
        self.flush_s = flush_s
        self.on_dropped = on_dropped
        self.written = 0
        self.dropped = 0
        self._sqlite = trio.CapacityLimiter(1)
        self._last_prune = 0.0
        self._rows: list[Values] = []  # built by `_take` as decisions are published, written in batches
        self._missed = 0  # decisions not taken since the last batch: the writer had fallen behind
        self._wake = trio.Event()  # set when a first row waits or the hub closed
        self._closed = False

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            store = await trio.to_thread.run_sync(DecisionLogStore, self.path, limiter=self._sqlite)
        except (OSError, sqlite3.Error) as exc:  # a read-only or full data dir: daari runs without the log
            log.warning("decision log disabled: cannot open %s: %s", self.path, exc)
            task_status.started()
            return
        try:
            await self._prune(store)
            with self.hub.attach("decision_log", self._take, on_close=self._hub_closed):
                task_status.started()
                while True:
                    if not self._rows:
                        if self._closed:
                            return  # the hub closed: everything published was written
                        self._wake = trio.Event()
                        await self._wake.wait()
                        continue
                    try:
                        # Let a burst gather: one wake-up and one transaction per interval, not per request.
                        await trio.sleep(self.flush_s)
                    finally:
                        rows, self._rows = self._rows, []
                        missed, self._missed = self._missed, 0
                        self._count_dropped(missed)  # a lag ends when its batch is taken (a re-subscription)
                        with trio.CancelScope(shield=True):  # a shutdown must not lose a taken batch
                            await self._write(store, rows)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(store.close, limiter=self._sqlite)

    def _take(self, decision: Any) -> None:
        """Attached to the hub: the decision's row, built while the decision is fresh in the CPU's cache, joins
        the next batch; past `buffer` rows waiting the writer has fallen behind and the row is dropped (counted
        once the batch is taken), and the hub counts the writer as a dropped subscriber once per lag."""
        rows = self._rows
        if len(rows) >= self.buffer:
            if not self._missed:
                self.hub.count_drop("decision_log")
            self._missed += 1
            return
        rows.append(self.to_row(decision))
        if len(rows) == 1:
            self._wake.set()

    def _hub_closed(self) -> None:
        self._closed = True
        self._wake.set()

    async def _write(self, store: DecisionLogStore, rows: list[Values]) -> None:
        try:
            for start in range(0, len(rows), self.batch):  # bounded transactions after a long interval
                self.written += await trio.to_thread.run_sync(store.insert_values, rows[start:start + self.batch],
                                                              limiter=self._sqlite)
        except Exception:  # disk full, read-only: the log loses rows, requests go on
            log.warning("decision log write failed; %d rows lost", len(rows), exc_info=True)
            self._count_dropped(len(rows))
        await self._prune(store)

    async def _prune(self, store: DecisionLogStore) -> None:
        now = time.monotonic()
        if self._last_prune and now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        try:
            await trio.to_thread.run_sync(store.prune, self.retention_s, self.max_rows, limiter=self._sqlite)
        except Exception:
            log.warning("decision log pruning failed", exc_info=True)

    def _count_dropped(self, count: int) -> None:
        if count <= 0:
            return
        self.dropped += count
        if self.on_dropped is not None:
            self.on_dropped(count)
