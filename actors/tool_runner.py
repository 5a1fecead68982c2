"""ToolRunnerActor: runs allowlisted commands (never through a shell) and owns the command context store.

`await runner.call(RunCommand(plan))` runs the command as a task of its own (a concurrent handler), so the
mailbox never waits on a command, under the asker's cancel scope: the asker leaving (client gone) kills
it. Runs beyond `tools.max_concurrency` wait for a slot; beyond `max_queue` more, the call is shed (503).
Each command runs with `trio.run_process` in its own session (process group); a timeout or a cancel kills
the whole group. Output goes to a log file in the data dir; the answer gets a capped head and tail of it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import trio

from actors.runtime import Actor, Call, handles
from daari.config import ToolsConfig
from daari.errors import Overloaded
from daari.tools.ccs_store import CcsEntry, CcsStore
from daari.tools.logs import LogBounds, prune_logs
from daari.tools.plan import CommandPlan
from daari.tools.policy import GIT_HARDENING, Refused, git_overrides, scrubbed_env

logger = logging.getLogger("daari.tools")

GIT_CONFIG_TIMEOUT_S = 10.0
DRAIN_AFTER_EXIT_S = 1.0  # output still in the pipe when the command exits
CHUNK = 64 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None  # None when the command was killed (timeout)
    duration_ms: float
    timed_out: bool
    summary: str  # head and tail of the output, capped at tools.answer_max_chars
    log_path: str
    output_bytes: int


@dataclass(frozen=True)
class RunRefused:
    reason: str


@dataclass(frozen=True)
class RunCommand(Call[RunResult | RunRefused]):
    plan: CommandPlan


@dataclass(frozen=True)
class CcsGet(Call[CcsEntry | None]):
    key: str


@dataclass(frozen=True)
class CcsInvalidate(Call[None]):
    key: str


class _Capture:
    """Keeps the first and the last `cap` bytes of the output, and writes all of it (up to a limit) to the log."""

    def __init__(self, cap: int, log_limit: int) -> None:
        self.cap = cap
        self.log_limit = log_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.logged = 0

    def add(self, chunk: bytes | bytearray) -> bytes:
        """Remember `chunk`; returns the part of it that still fits in the log."""
        self.total += len(chunk)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk_rest = chunk[room:]
        else:
            chunk_rest = chunk
        if chunk_rest:
            self.tail += chunk_rest
            del self.tail[:-self.cap]
        keep = bytes(chunk[:max(0, self.log_limit - self.logged)])
        self.logged += len(keep)
        return keep

    def summary(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.tail:
            return head
        omitted = self.total - len(self.head) - len(self.tail)
        half = self.cap // 2
        if omitted <= 0 and len(self.head) + len(self.tail) <= self.cap:
            return head + self.tail.decode("utf-8", "replace")
        shown_head = self.head[:half].decode("utf-8", "replace")
        shown_tail = self.tail[-half:].decode("utf-8", "replace")
        skipped = self.total - half - len(self.tail[-half:])
        return f"{shown_head}\n[... {skipped} bytes omitted here; the full output is in the log ...]\n{shown_tail}"


async def _kill_group(process: trio.Process) -> None:
    """run_process's deliver_cancel: the command and everything it started in its session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class ToolRunnerActor(Actor):
    name = "tool_runner"

    def __init__(self, data_dir: Path, config: ToolsConfig, base_env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.db_path = data_dir / "ccs.sqlite"
        self.logs_dir = data_dir / "tools" / "logs"
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.limiter = trio.CapacityLimiter(config.max_concurrency)
        self.db_limiter = trio.CapacityLimiter(1)
        self.in_flight = 0
        self.store: CcsStore | None = None
        self.log_bounds = LogBounds(config.logs_max_files, config.logs_max_total_bytes,
                                    config.logs_max_age_days * 86_400)
        self.logs_in_use: set[Path] = set()  # logs of commands still running: never pruned
        self._pruning = trio.CapacityLimiter(1)

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.logs_dir, 0o700)
        await self._prune_logs()
        self.store = await trio.to_thread.run_sync(CcsStore, self.db_path, limiter=self.db_limiter)
        try:
            yield  # stopping cancels the runs (tasks of this actor), which kills their process groups
        finally:
            self.store.close()

    @handles(CcsGet)
    async def ccs_get(self, request: CcsGet) -> CcsEntry | None:
        return await self._db(lambda store: store.get(request.key, time.time()))

    @handles(CcsInvalidate)
    async def ccs_invalidate(self, request: CcsInvalidate) -> None:
        await self._db(lambda store: store.invalidate(request.key))

    async def _db(self, operation: Callable[[CcsStore], T]) -> T:
        store = self.store
        assert store is not None
        return await trio.to_thread.run_sync(operation, store, limiter=self.db_limiter)

    @handles(RunCommand, concurrent=True)
    async def run_command(self, request: RunCommand) -> RunResult | RunRefused:
        plan = request.plan
        if self.in_flight >= self.config.max_concurrency + self.config.max_queue:
            raise Overloaded(f"the tool runner is busy: {self.config.max_concurrency} commands running and "
                             f"{self.config.max_queue} waiting (tools.max_queue); retry shortly")
        self.in_flight += 1
        try:
            async with self.limiter:
                outcome = await self._execute(plan)
            await self._prune_logs()
            if isinstance(outcome, RunResult) and not outcome.timed_out and plan.ttl_s > 0:
                await self._db(partial(_remember, plan, outcome))
            return outcome
        finally:
            self.in_flight -= 1

    async def _prune_logs(self) -> None:
        """Logs past tools.logs_max_files / logs_max_total_bytes / logs_max_age_days go, oldest first."""
        try:
            await trio.to_thread.run_sync(prune_logs, self.logs_dir, self.log_bounds, time.time(),
                                          frozenset(self.logs_in_use), limiter=self._pruning)
        except OSError as exc:  # a log directory daari cannot clean must not fail a command
            logger.warning("tool logs in %s could not be pruned: %s", self.logs_dir, exc)

    async def _execute(self, plan: CommandPlan) -> RunResult | RunRefused:
        env = {**scrubbed_env(self.base_env), **plan.extra_env}
        argv = list(plan.argv)
        if plan.git:
            try:
                argv[1:1] = git_overrides(await self._git_local_config(plan, env))
            except Refused as exc:
                return RunRefused(str(exc))
        log_path = self.logs_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{plan.intent}-{uuid.uuid4().hex[:8]}.log"
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.logs_in_use.add(log_path)
        try:
            return await self._run_logged(plan, argv, env, fd, log_path)
        finally:
            self.logs_in_use.discard(log_path)

    async def _run_logged(self, plan: CommandPlan, argv: list[str], env: dict[str, str], fd: int,
                          log_path: Path) -> RunResult:
        capture = _Capture(self.config.answer_max_chars, self.config.log_max_bytes)
        started = trio.current_time()
        timed_out = False
        exit_code: int | None = None
        async with await trio.open_file(fd, "wb") as log:
            await log.write(f"$ {plan.display}\n# cwd: {plan.cwd}\n".encode())
            async with trio.open_nursery() as nursery:
                process: trio.Process = await nursery.start(partial(
                    trio.run_process, argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, check=False, cwd=plan.cwd, env=env, start_new_session=True,
                    deliver_cancel=_kill_group))
                with trio.move_on_after(plan.timeout_s) as timer:
                    async with trio.open_nursery() as readers:
                        assert process.stdout is not None
                        readers.start_soon(self._pump, process.stdout, capture, log)
                        exit_code = await process.wait()
                        # What the command started and left behind goes with it; its output is drained briefly.
                        await _kill_group(process)
                        readers.cancel_scope.deadline = trio.current_time() + DRAIN_AFTER_EXIT_S
                if timer.cancelled_caught:
                    timed_out, exit_code = True, None
                    nursery.cancel_scope.cancel()
            if capture.total > capture.logged:
                await log.write(f"\n[log truncated: {capture.total - capture.logged} more bytes]\n".encode())
        duration_ms = round((trio.current_time() - started) * 1000, 1)
        return RunResult(exit_code, duration_ms, timed_out, capture.summary(), str(log_path), capture.total)

    @staticmethod
    async def _pump(stream: trio.abc.ReceiveStream, capture: _Capture, log: trio.abc.AsyncResource) -> None:
        while chunk := await stream.receive_some(CHUNK):
            keep = capture.add(chunk)
            if keep:
                await log.write(keep)  # type: ignore[attr-defined]

    async def _git_local_config(self, plan: CommandPlan, env: dict[str, str]) -> str:
        """The repository's own config keys (no includes followed), to neutralize the command-running ones."""
        argv = [plan.argv[0], *GIT_HARDENING, "config", "--local", "--no-includes", "--list", "-z"]
        with trio.move_on_after(GIT_CONFIG_TIMEOUT_S):
            done = await trio.run_process(argv, stdin=subprocess.DEVNULL, capture_stdout=True,
                                          capture_stderr=True, check=False, cwd=plan.cwd, env=env,
                                          start_new_session=True, deliver_cancel=_kill_group)
            if done.returncode == 0:
                return done.stdout.decode("utf-8", "replace")
            raise Refused("git cannot read this repository's config")
        raise Refused("git config did not answer in time")


def _remember(plan: CommandPlan, result: RunResult, store: CcsStore) -> None:
    now = time.time()
    store.put(CcsEntry(plan.ccs_key, str(plan.cwd), plan.display, plan.kind, result.exit_code, result.summary,
                       result.log_path, result.duration_ms, now, now + plan.ttl_s))
