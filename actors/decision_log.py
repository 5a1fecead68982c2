"""DecisionLogActor: the one writer of the decision log; a decision hub subscriber that writes in batches.

It never slows a request: it reads its own bounded hub subscription, and when it falls behind the hub drops
it; it subscribes again at once and counts the decisions it missed as dropped rows.
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

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            store = await trio.to_thread.run_sync(DecisionLogStore, self.path, limiter=self._sqlite)
        except (OSError, sqlite3.Error) as exc:  # a read-only or full data dir: daari runs without the log
            log.warning("decision log disabled: cannot open %s: %s", self.path, exc)
            task_status.started()
            return
        try:
            await self._prune(store)
            started = False
            while True:
                base = self.hub.published
                received = 0
                with self.hub.subscribe("decision_log", buffer=self.buffer) as subscription:
                    if not started:
                        task_status.started()
                        started = True
                    while True:
                        try:
                            first = await subscription.receive()
                        except trio.EndOfChannel:
                            break
                        batch = [first]
                        try:
                            # Let a burst gather: one wake-up and one transaction per interval, not per request.
                            await trio.sleep(self.flush_s)
                        finally:
                            while True:
                                try:
                                    batch.append(subscription.receive_nowait())
                                except (trio.WouldBlock, trio.EndOfChannel):
                                    break
                            received += len(batch)
                            with trio.CancelScope(shield=True):  # a shutdown must not lose a taken batch
                                await self._write(store, batch)
                    if not subscription.lagged:
                        return  # the hub closed: everything published was written
                    missed = self.hub.published - base - received
                self._count_dropped(missed)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(store.close, limiter=self._sqlite)

    async def _write(self, store: DecisionLogStore, batch: list[Any]) -> None:
        rows = [self.to_row(decision) for decision in batch]
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
