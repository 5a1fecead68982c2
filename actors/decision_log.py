"""DecisionLogActor: the decision log's one writer; a decision hub subscriber that writes in batches.

It never slows a request: attached to the hub, it only queues each decision, bounded; when it falls behind
(`buffer` decisions waiting) further decisions are dropped and counted until it takes the batch, and the hub
counts it as a dropped subscriber. Once per flush interval it turns the batch into rows and hands them to its
writer process (actors/decision_log_process.py), which does the SQLite work outside daari's process: an
in-process writer thread cost each request ~15-25 us of the event loop's time (docs/performance.md). A writer
that dies is started again; the rows it had are counted as dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from actors.decision_log_process import WriterGone, WriterProcess
from actors.hub import Hub
from daari.observe.decision_log import Values

log = logging.getLogger("daari.decision_log")

START_TIMEOUT_S = 30.0  # a writer process not ready by then is given up (the log is off)
WRITE_TIMEOUT_S = 30.0  # a writer that has not stored a chunk by then is stuck (a hung disk): killed
RESTART_AFTER_S = 5.0  # a writer that died is not started again sooner (a crash loop would spin)


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
        self.writer: WriterProcess | None = None  # the writer process now, if one runs
        self._last_start = 0.0  # when a writer was last started again (monotonic)
        self._items: list[Any] = []  # queued by `_take` as decisions are published, written in batches
        self._missed = 0  # decisions not taken since the last batch: the writer had fallen behind
        self._wake = trio.Event()  # set when a first decision waits or the hub closed
        self._closed = False

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # Attached before the writer process is up (it takes ~0.2 s to start): no decision made after daari
        # started is missed, and daari's start does not wait for it.
        with self.hub.attach("decision_log", self._take, on_close=self._hub_closed):
            task_status.started()
            try:
                # Shielded: a shutdown right after the start still writes what was decided meanwhile.
                with trio.CancelScope(shield=True), trio.fail_after(START_TIMEOUT_S):
                    self.writer = await self._start_writer()
            except (WriterGone, trio.TooSlowError) as exc:  # a read-only or full data dir: daari runs without the log
                log.warning("decision log disabled: cannot open %s: %s", self.path, exc)
                return
            try:
                while True:
                    if not self._items:
                        if self._closed:
                            return  # the hub closed: everything published was written
                        self._wake = trio.Event()
                        await self._wake.wait()
                        continue
                    try:
                        # Let a burst gather: one hand-over per interval, not per request.
                        await trio.sleep(self.flush_s)
                    finally:
                        items, self._items = self._items, []
                        missed, self._missed = self._missed, 0
                        self._count_dropped(missed)  # a lag ends when its batch is taken (a re-subscription)
                        with trio.CancelScope(shield=True):  # a shutdown must not lose a taken batch
                            await self._write(items)
            finally:
                if self.writer is not None:
                    await self.writer.close()

    async def _start_writer(self) -> WriterProcess:
        return await WriterProcess.start(self.path, retention_s=self.retention_s, max_rows=self.max_rows)

    def _take(self, decision: Any) -> None:
        """Attached to the hub: the decision joins the next batch (its row is made with the batch's, in one tight
        loop: cheaper than one at a time between requests); past `buffer` waiting the writer has fallen behind and
        the decision is dropped (counted once the batch is taken), and the hub counts the writer as a dropped
        subscriber once per lag."""
        items = self._items
        if len(items) >= self.buffer:
            if not self._missed:
                self.hub.count_drop("decision_log")
            self._missed += 1
            return
        items.append(decision)
        if len(items) == 1:
            self._wake.set()

    def _hub_closed(self) -> None:
        self._closed = True
        self._wake.set()

    async def _write(self, items: list[Any]) -> None:
        """Write `items` through the writer process, starting a new one if the last is gone."""
        rows = self._rows(items)
        if self.writer is None:
            self.writer = await self._restart()
        writer = self.writer
        if writer is None:
            self._count_dropped(len(rows))
            return
        start = 0
        try:
            for start in range(0, len(rows), self.batch):  # bounded transactions after a long interval
                chunk = rows[start:start + self.batch]
                with trio.fail_after(WRITE_TIMEOUT_S):  # shielded by the caller: a shutdown must not hang here
                    stored = await writer.write(chunk)
                self.written += stored
                if stored < len(chunk):  # disk full, read-only: the writer said why on stderr
                    log.warning("decision log write failed; %d rows lost", len(chunk) - stored)
                    self._count_dropped(len(chunk) - stored)
        except (WriterGone, trio.TooSlowError) as exc:
            lost = len(rows) - start  # the chunks before `start` were stored
            log.warning("decision log writer ended (%s); %d rows lost; it is started again",
                        exc or "no answer in time", lost)
            self._count_dropped(lost)
            self.writer = None
            await writer.kill()

    def _rows(self, items: list[Any]) -> list[Values]:
        to_row = self.to_row
        rows = []
        for item in items:
            try:
                rows.append(to_row(item))
            except Exception:  # a decision the row maker cannot take is lost, not the writer
                log.exception("decision log: cannot make a row of a decision")
                self._count_dropped(1)
        return rows

    async def _restart(self) -> WriterProcess | None:
        now = time.monotonic()
        if self._last_start and now - self._last_start < RESTART_AFTER_S:
            return None
        self._last_start = now
        try:
            return await self._start_writer()
        except WriterGone as exc:
            log.warning("decision log writer could not start again: %s", exc)
            return None

    def _count_dropped(self, count: int) -> None:
        if count <= 0:
            return
        self.dropped += count
        if self.on_dropped is not None:
            self.on_dropped(count)
