"""The decision log's writer process: its protocol, and the DecisionLogActor when the writer dies, cannot open
the log, or is cancelled with rows in hand (no row lost without being counted, no process left behind)."""

from __future__ import annotations

import gc
import io
import itertools
import logging
import os
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from actors.decision_log import DecisionLogActor, DecisionQueue
from actors.decision_log_process import WriterGone, WriterProcess
from actors.faults import FAULTS
from actors.hub import Hub
from actors.runtime import ActorStatus, Mailbox, RestartPolicy, supervise
from daari.observe.decision_log import COLUMNS, DecisionLogStore, Values, read_rows
from daari.observe.decision_log_writer import frame, read_frame, serve


def row(request_id: str, at: float = 1.0) -> Values:
    return (request_id, at, *[None] * (len(COLUMNS) - 2))


class Item:
    published = itertools.count()

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        # Now (older rows would be pruned by the next writer), and in publishing order (the order rows read back).
        self.time = time.time() + next(Item.published) / 1000


def to_row(item: Any) -> Values:
    if item.request_id == "poison":
        raise ValueError("cannot make a row of this")
    return row(item.request_id, item.time)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_frames_round_trip_and_a_cut_frame_ends_the_input() -> None:
    rows = [row("a"), ("b", 2.5, "ünï 🙂", *[None] * (len(COLUMNS) - 3))]
    stream = io.BytesIO(frame(rows) + frame(rows[:1]))
    assert read_frame(stream) == rows
    assert read_frame(stream) == rows[:1]
    assert read_frame(stream) is None
    assert read_frame(io.BytesIO(frame(rows)[:-3])) is None  # daari died mid-frame: nothing half-written


def test_each_frame_is_answered_with_the_rows_stored_and_a_failed_write_with_zero(tmp_path: Path) -> None:
    store = DecisionLogStore(tmp_path / "d.sqlite")
    bad = [("short", 1.0)]  # too few values: SQLite refuses the statement
    source = io.BytesIO(frame([row("a"), row("b")]) + frame(bad) + frame([row("c")]))
    answers = io.BytesIO()
    serve(store, source, answers, retention_s=3600, max_rows=10_000)
    stored = [r["request_id"] for r in store.rows_since(0)]
    store.close()
    assert answers.getvalue() == b"2\n0\n1\n" and stored == ["a", "b", "c"]


async def test_the_writer_is_another_process_without_keys_and_ends_when_its_input_closes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-writer-env")
    writer = await WriterProcess.start(tmp_path / "d.sqlite", retention_s=3600, max_rows=10_000)
    assert writer.process.pid != os.getpid()
    environment = await trio.Path(f"/proc/{writer.process.pid}/environ").read_bytes()
    assert b"sk-canary-writer-env" not in environment and b"PATH=" in environment
    assert await writer.write([row("a"), row("b")]) == 2
    await writer.close()
    assert writer.process.returncode == 0
    assert [r["request_id"] for r in read_rows(tmp_path / "d.sqlite", 0)] == ["a", "b"]


async def test_a_log_that_cannot_be_opened_is_off_and_daari_goes_on(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "decisions.sqlite").mkdir()  # not a database file
    with pytest.raises(WriterGone):
        await WriterProcess.start(tmp_path / "decisions.sqlite", retention_s=3600, max_rows=10_000)
    hub: Hub[Item] = Hub()
    with caplog.at_level(logging.WARNING, logger="daari.decision_log"), trio.fail_after(30):
        async with supervised_log(tmp_path, hub, buffer=16) as log:
            while log.status.state != "failed":  # tried again with the supervisor's backoff, then given up
                await trio.sleep(0.01)
            assert log.status.restarts == FAST.max_restarts and not log.status.required
            assert hub.subscribers == []  # nothing queues decisions that cannot be written
    assert "decision log disabled" in caplog.text


async def test_a_writer_that_dies_loses_only_its_rows_counted_and_is_started_again(tmp_path: Path) -> None:
    hub: Hub[Item] = Hub()
    dropped: list[int] = []
    first_pid = None
    with trio.fail_after(60):
        async with supervised_log(tmp_path, hub, buffer=1000, on_dropped=dropped.append) as log:
            for index in range(5):
                hub.publish(Item(f"before{index}"))
            while log.queue.written < 5:
                await trio.sleep(0.01)
            first = writer_process(log.current)
            first_pid = first.pid
            first.kill()
            await first.wait()
            for index in range(3):  # handed to a dead writer: lost, and counted
                hub.publish(Item(f"lost{index}"))
            while sum(dropped) < 3:
                await trio.sleep(0.01)
            for index in range(4):  # a new run's writer takes these
                hub.publish(Item(f"after{index}"))
            hub.publish(Item("poison"))  # a decision without a row: dropped and counted, the writer goes on
            while log.queue.written < 9:
                await trio.sleep(0.01)
            assert log.status.restarts == 1 and len(log.runs) == 2
            hub.close()
    stored = [r["request_id"] for r in read_rows(tmp_path / "decisions.sqlite", 0)]
    assert stored == [f"before{i}" for i in range(5)] + [f"after{i}" for i in range(4)]
    assert sum(dropped) == log.queue.dropped == 4 and log.queue.written == 9
    assert not alive(first_pid) and writer_process(log.current).returncode == 0  # the new one ended with the run


@pytest.mark.parametrize("writer_up", [True, False])
async def test_cancelled_with_a_batch_in_hand_the_batch_is_written_and_no_process_is_left(tmp_path: Path,
                                                                                          writer_up: bool) -> None:
    """Cancelled (daari shutting down) while gathering a batch, or even while its writer process starts."""
    hub: Hub[Item] = Hub()
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    with trio.fail_after(60):
        async with supervised_log(tmp_path, hub, buffer=1000, flush_s=3600) as log:  # only a cancel ends the wait
            while writer_up and (not log.runs or log.current.writer is None):
                await trio.sleep(0.01)
            for index in range(20):
                hub.publish(Item(f"r{index}"))
            await trio.lowlevel.checkpoint()
            assert log.queue.written == 0  # still gathering
    stored = [r["request_id"] for r in read_rows(tmp_path / "decisions.sqlite", 0)]
    assert stored == [f"r{i}" for i in range(20)] and log.queue.written == 20
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= children_before


async def test_a_written_batch_is_not_kept_while_the_log_waits_for_the_next(tmp_path: Path) -> None:
    """Once written, a batch's decisions are freed: the flush loop must not hold the last batch while daari is
    quiet (the soak found 1,000 decisions kept after 1,000 streams ended: docs/performance.md, "Soak")."""
    hub: Hub[Item] = Hub()
    with trio.fail_after(60):
        async with supervised_log(tmp_path, hub, buffer=1000) as log:
            items = [Item(f"r{index}") for index in range(10)]
            refs = [weakref.ref(item) for item in items]
            for item in items:
                hub.publish(item)
            del items, item
            while log.queue.written < 10:
                await trio.sleep(0.01)
            await trio.sleep(0.05)  # the flush loop is back waiting for the next decision
            gc.collect()
            assert [ref() for ref in refs] == [None] * 10


FAST = RestartPolicy(max_restarts=3, window_s=60.0, backoff_initial_s=0.0, backoff_max_s=0.0)


@dataclass
class SupervisedLog:
    queue: DecisionQueue
    status: ActorStatus
    runs: list[DecisionLogActor] = field(default_factory=list)

    @property
    def current(self) -> DecisionLogActor:
        return self.runs[-1]


@asynccontextmanager
async def supervised_log(tmp_path: Path, hub: Hub[Item], *, buffer: int, flush_s: float = 0.0,
                         on_dropped: Callable[[int], None] | None = None) -> AsyncIterator[SupervisedLog]:
    """The decision log as daari runs it: its queue on the hub, the actor under a supervisor (not required);
    leaving the block cancels it, as a shutdown does."""
    queue = DecisionQueue(hub, buffer, on_dropped)
    log = SupervisedLog(queue, ActorStatus("decision_log", required=False))

    def run() -> DecisionLogActor:
        actor = DecisionLogActor(queue, tmp_path / "decisions.sqlite", to_row, batch=8, retention_s=3600,
                                 max_rows=10_000, flush_s=flush_s)
        log.runs.append(actor)
        return actor

    async with trio.open_nursery() as nursery:
        await nursery.start(partial(supervise, run, Mailbox("decision_log", 16, FAULTS), log.status, FAST,
                                    required=False, on_down=queue.close))
        yield log
        nursery.cancel_scope.cancel()


def writer_process(actor: DecisionLogActor) -> trio.Process:
    assert actor.writer is not None, "the actor has no writer process now"
    return actor.writer.process


async def test_a_stuck_writer_is_killed_after_the_write_timeout_and_replaced(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that stops answering (a hung disk: here SIGSTOP) must not hold the log, or daari's shutdown."""
    import signal

    import actors.decision_log

    monkeypatch.setattr(actors.decision_log, "WRITE_TIMEOUT_S", 0.5)
    hub: Hub[Item] = Hub()
    dropped: list[int] = []
    with trio.fail_after(60):
        async with supervised_log(tmp_path, hub, buffer=1000, on_dropped=dropped.append) as log:
            while not log.runs or log.current.writer is None:
                await trio.sleep(0.01)
            stuck = writer_process(log.current)
            os.kill(stuck.pid, signal.SIGSTOP)
            for index in range(3):
                hub.publish(Item(f"stuck{index}"))
            while sum(dropped) < 3:
                await trio.sleep(0.01)
            hub.publish(Item("after"))
            while log.queue.written < 1:
                await trio.sleep(0.01)
            hub.close()
    assert [r["request_id"] for r in read_rows(tmp_path / "decisions.sqlite", 0)] == ["after"]
    assert stuck.returncode is not None and not alive(stuck.pid)
