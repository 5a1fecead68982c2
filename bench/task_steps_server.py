"""`python -m bench.task_steps_server`: `daari serve` with a Trio instrument and stamped socket calls (bench only).

Started by `bench.task_steps`, never by hand. Before Trio is imported, `socket.socket` is replaced by a subclass
whose `send`/`recv` note a `time.perf_counter()` stamp, the descriptor and the first bytes of each call (Trio's
socket methods capture the stdlib methods when Trio is imported, so every socket call in the process goes
through them: Hypercorn's and the h11 front end's, the lean upstream client's, Trio's wake-up socketpair's). A
`trio.abc.Instrument` notes each task's scheduling, each step's start and end, and each run-loop pass's I/O wait.
At exit (SIGTERM, daari's own graceful stop) the notes are written to `--out` as JSON lines:

    [stamp, kind, detail...]   kind: "sched" | "step" | "done" | "wait" | "woke" | "spawn" | "exit" (the
                               instrument's), "send" | "recv" | "accept" (the socket calls), "app" (the front
                               end called daari's ASGI app)

Nothing here changes what daari serves: the subclass calls the stdlib methods and returns what they return.
"""

from __future__ import annotations

import socket
import sys
import time
from collections import deque
from typing import Any

NOTES: deque[tuple[Any, ...]] = deque(maxlen=2_000_000)
_now = time.perf_counter
_note = NOTES.append
_STD = socket.socket
_SEND, _RECV = _STD.send, _STD.recv


class StampedSocket(_STD):
    """A stdlib socket whose sends and receives are noted: the stamp before the system call, the descriptor, the
    bytes (their first 4 KiB; -1: it would block) and how long the call took (a long one was preempted: on 2 shared
    cores the peer that a send wakes can take the CPU before the sender notes its return)."""

    __slots__ = ()

    def send(self, data: Any, flags: int = 0, /) -> int:
        began = _now()
        try:
            sent = _SEND(self, data, flags)
        except BlockingIOError:
            _note((began, "send", self.fileno(), -1, b"", _now() - began))
            raise
        _note((began, "send", self.fileno(), sent, bytes(memoryview(data)[:4096]), _now() - began))
        return sent

    def recv(self, size: int, flags: int = 0, /) -> bytes:
        began = _now()
        try:
            data = _RECV(self, size, flags)
        except BlockingIOError:
            _note((began, "recv", self.fileno(), -1, b"", _now() - began))
            raise
        _note((began, "recv", self.fileno(), len(data), data[:4096], _now() - began))
        return data


    def _accept(self) -> tuple[int, Any]:
        began = _now()
        try:
            fd, address = super()._accept()  # type: ignore[misc]
        except BlockingIOError:
            _note((began, "accept", self.fileno(), -1, b"", _now() - began))
            raise
        _note((began, "accept", self.fileno(), fd, b"", _now() - began))
        return fd, address


socket.socket = StampedSocket  # type: ignore[misc]  # before Trio (and daari) capture socket.socket's methods

import trio  # noqa: E402  (after the patch, on purpose)


class Steps(trio.abc.Instrument):
    """Every task scheduled, stepped and ended, every run-loop pass's I/O wait, stamped."""

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        _note((_now(), "spawn", id(task), task.name))

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        _note((_now(), "exit", id(task), task.name))

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        _note((_now(), "sched", id(task), task.name))

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        _note((_now(), "step", id(task), task.name))

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        _note((_now(), "done", id(task), task.name))

    def before_io_wait(self, timeout: float) -> None:
        _note((_now(), "wait", timeout))

    def after_io_wait(self, timeout: float) -> None:
        _note((_now(), "woke", timeout))


def main() -> int:
    import argparse
    import json

    from daari.config import load_config
    from daari.server.app import DaariApp
    from daari.server.serve import run_server

    called = DaariApp.__call__

    async def noted(self: DaariApp, scope: Any, receive: Any, send: Any) -> None:
        _note((_now(), "app", scope.get("path", "")))
        await called(self, scope, receive, send)

    DaariApp.__call__ = noted  # type: ignore[method-assign]  # a stamp when the front end calls the app

    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = load_config(args.config, {"server.port": args.port, "data_dir": args.data_dir})
    try:
        trio.run(lambda: run_server(config, handle_signals=True), instruments=[Steps()])
    finally:
        with open(args.out, "w") as out:
            for note in NOTES:
                out.write(json.dumps([x.decode("latin1") if isinstance(x, bytes) else x for x in note]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
