"""The decision log's actor: the one writer of the decision log, a decision hub subscriber that writes in batches.

It never slows a request. `DecisionQueue` is attached to the hub (by the composition root, before anything is
published): it only queues each decision, bounded; past `buffer` waiting, decisions are dropped and counted until
the actor takes the batch, and the hub counts the log as a dropped subscriber once per lag. The queue outlives
the actor's runs, so nothing published while the actor restarts is missed.

`DecisionLogActor` is supervised like every actor (server/actor_table.py, not required: daari runs without its log).
Each run starts a writer process (actors/decision_log_process.py), which does the SQLite work outside daari's
process: an in-process writer thread cost each request ~15-25 us of the event loop's time
(docs/performance.md). Once per flush interval the run turns the queued batch into rows and hands them over. A
writer that dies or stops answering loses only the rows it held (counted) and crashes the run: the supervisor
starts a new one with its backoff, and gives up (the log off, /healthz says why) after its restart cap.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from actors.decision_log_process import WriterGone, WriterProcess
from actors.hub import Attachment, Hub
from actors.runtime import Actor
from daari.observe.decision_log import Values

log = logging.getLogger("daari.decision_log")

START_TIMEOUT_S = 30.0  # a writer process not ready by then is given up (this run crashes)
WRITE_TIMEOUT_S = 30.0  # a writer that has not stored a chunk by then is stuck (a hung disk): killed


class DecisionLogDown(Exception):
    """This run's writer could not start, or died with work in hand: the supervisor starts a new run."""


class DecisionQueue:
    """The decisions waiting for the log, across the actor's runs; attached to the hub as a synchronous handler."""

    def __init__(self, hub: Hub[Any], buffer: int, on_dropped: Callable[[int], None] | None = None) -> None:
        self.hub = hub
        self.buffer = buffer
        self.on_dropped = on_dropped
        self.written = 0
        self.dropped = 0
        self.closed = False  # the hub closed: no more decisions will come
        self._items: list[Any] = []
        self._missed = 0  # decisions not taken since the last batch: the log had fallen behind
        self._wake = trio.Event()  # set when a first decision waits or the hub closed
        self._attachment: Attachment[Any] | None = hub.attach("decision_log", self._take, on_close=self._hub_closed)

    def _take(self, decision: Any) -> None:
        """Attached to the hub: the decision joins the next batch (its row is made with the batch's, in one tight
        loop: cheaper than one at a time between requests); past `buffer` waiting the log has fallen behind and
        the decision is dropped (counted once the batch is taken), and the hub counts the log as a dropped
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
        self.closed = True
        self._wake.set()

    @property
    def empty(self) -> bool:
        return not self._items

    async def wait(self) -> None:
        """Until a decision waits (or the hub closed)."""
        if self._items or self.closed:
            return
        self._wake = trio.Event()
        await self._wake.wait()

    def take(self) -> list[Any]:
        """The batch gathered so far; a lag ends when its batch is taken (a re-subscription)."""
        items, self._items = self._items, []
        missed, self._missed = self._missed, 0
        self.count_dropped(missed)
        return items

    def count_dropped(self, count: int) -> None:
        if count <= 0:
            return
        self.dropped += count
        if self.on_dropped is not None:
            self.on_dropped(count)

    def close(self) -> None:
        """The log is down for good (its supervisor gave up or stopped): stop queueing; what waits is lost."""
        if self._attachment is not None:
            self._attachment.detach()
            self._attachment = None
        self.count_dropped(len(self.take()))


class DecisionLogActor(Actor):
    name = "decision_log"

    def __init__(self, queue: DecisionQueue, path: Path, to_row: Callable[[Any], Values], *, batch: int,
                 retention_s: float, max_rows: int, flush_s: float = 0.0) -> None:
        self.queue = queue
        self.path = path
        self.to_row = to_row
        self.batch = batch
        self.retention_s = retention_s
        self.max_rows = max_rows
        self.flush_s = flush_s
        self.writer: WriterProcess | None = None  # this run's writer process

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        try:
            # Shielded: a shutdown right after the start still writes what was decided meanwhile.
            with trio.CancelScope(shield=True), trio.fail_after(START_TIMEOUT_S):
                writer = await WriterProcess.start(self.path, retention_s=self.retention_s, max_rows=self.max_rows)
        except (WriterGone, trio.TooSlowError) as exc:  # a read-only or full data dir
            log.warning("decision log disabled for now: cannot open %s: %s", self.path, exc or "no answer in time")
            raise DecisionLogDown(f"cannot open {self.path}") from None
        self.writer = writer
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._flush, writer)
                yield
        finally:
            await writer.close()  # shielded inside: the writer finishes what it holds

    async def _flush(self, writer: WriterProcess) -> None:
        """Hand each gathered batch to the writer until the hub closes and everything published is written."""
        queue = self.queue
        while True:
            await queue.wait()
            if queue.closed and queue.empty:
                return
            try:
                await trio.sleep(self.flush_s)  # let a burst gather: one hand-over per interval, not per request
            finally:
                with trio.CancelScope(shield=True):  # a shutdown must not lose a taken batch
                    # the batch is not kept in a local: it would stay alive (up to `buffer` decisions and all
                    # they hold) through the wait for the next one, for as long as daari stays quiet
                    await self._write(writer, queue.take())

    async def _write(self, writer: WriterProcess, items: list[Any]) -> None:
        rows = self._rows(items)
        queue = self.queue
        start = 0
        try:
            for start in range(0, len(rows), self.batch):  # bounded transactions after a long interval
                chunk = rows[start:start + self.batch]
                with trio.fail_after(WRITE_TIMEOUT_S):  # shielded by the caller: a shutdown must not hang here
                    stored = await writer.write(chunk)
                queue.written += stored
                if stored < len(chunk):  # disk full, read-only: the writer said why on stderr
                    log.warning("decision log write failed; %d rows lost", len(chunk) - stored)
                    queue.count_dropped(len(chunk) - stored)
        except (WriterGone, trio.TooSlowError) as exc:
            lost = len(rows) - start  # the chunks before `start` were stored
            log.warning("decision log writer ended (%s); %d rows lost; a new one is started",
                        exc or "no answer in time", lost)
            queue.count_dropped(lost)
            await writer.kill()
            raise DecisionLogDown("the writer process ended") from None

    def _rows(self, items: list[Any]) -> list[Values]:
        to_row = self.to_row
        rows = []
        for item in items:
            try:
                rows.append(to_row(item))
            except Exception:  # a decision the row maker cannot take is lost, not the writer
                log.exception("decision log: cannot make a row of a decision")
                self.queue.count_dropped(1)
        return rows
