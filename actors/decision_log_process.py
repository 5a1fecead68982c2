"""The DecisionLogActor's handle on its writer process (daari/observe/decision_log_writer.py): start it, hand it
a batch and read how many rows it stored, close it and wait for it to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trio

from daari.observe.decision_log import Values
from daari.observe.decision_log_writer import frame

# The environment the writer gets: what Python needs to start and find daari, nothing else (no API keys: it
# never calls anyone).
WRITER_ENVIRONMENT = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "HOME", "LANG", "LC_ALL", "TMPDIR")
CLOSE_TIMEOUT_S = 10.0  # a writer that has not ended this long after its input closed is killed


class WriterGone(Exception):
    """The writer process could not be started, or ended (crashed, was killed) while it had work."""


class WriterProcess:
    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = bytearray()

    @classmethod
    async def start(cls, path: Path, *, retention_s: float, max_rows: int) -> WriterProcess:
        """Start a writer on `path`; it has opened the log when this returns. Raises WriterGone with its reason."""
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "daari.observe.decision_log_writer", str(path),
             "--retention-s", repr(retention_s), "--max-rows", str(max_rows)],
            # Its stderr is daari's: its few messages (a failed write, pruning) reach the same place, and a pipe
            # nobody drained could fill and stop it.
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={name: os.environ[name] for name in WRITER_ENVIRONMENT if name in os.environ})
        writer = cls(process)
        try:
            line = await writer._line()
        except WriterGone:
            line = b""
        except BaseException:  # cancelled while it opened the log: it must not outlive the asker
            await writer.kill()
            raise
        if line != b"ready":
            await writer.kill()
            raise WriterGone(f"the writer ended with status {process.returncode} (its reason is logged above)")
        return writer

    async def write(self, rows: list[Values]) -> int:
        """Hand `rows` over and wait until they are stored; returns how many were (0: the write failed)."""
        assert self.process.stdin is not None
        try:
            await self.process.stdin.send_all(frame(rows))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise WriterGone("the writer process ended") from exc
        answer = await self._line()
        try:
            return int(answer)
        except ValueError:
            raise WriterGone(f"the writer answered {answer[:80]!r}") from None

    async def close(self) -> None:
        """End the input, wait for the writer to finish what it holds (killed after CLOSE_TIMEOUT_S)."""
        with trio.CancelScope(shield=True):
            if self.process.stdin is not None:
                await self.process.stdin.aclose()
            with trio.move_on_after(CLOSE_TIMEOUT_S):
                await self.process.wait()
            await self.kill()

    async def kill(self) -> None:
        with trio.CancelScope(shield=True):
            if self.process.returncode is None:
                self.process.kill()
            await self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    await stream.aclose()

    async def _line(self) -> bytes:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some(4096)
            if not chunk:
                raise WriterGone(f"the writer process ended (status {self.process.returncode})")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line.strip()
