"""Run the agent as a child and hand it every SIGINT, SIGTERM and SIGHUP exactly once; return its exit code.

At an interactive terminal the agent shares daari code's process group, so it owns the terminal as if run
directly and the terminal's Ctrl-C reaches it straight away: daari code does not pass SIGINT on again (to
Claude Code and Codex a second Ctrl-C means "quit now"). Without a terminal the agent gets its own process
group and daari code forwards SIGINT too, so a signal sent to daari code alone, or to its whole group, still
reaches the agent once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from types import FrameType

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def at_terminal() -> bool:
    """stdin is a terminal and daari code's process group is its foreground group."""
    try:
        fd = sys.stdin.fileno()
        return os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except (OSError, ValueError):
        return False


def exit_code(returncode: int) -> int:
    """The shell's convention: a child killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def run(argv: list[str], env: Mapping[str, str]) -> int:
    interactive = at_terminal()
    shared_by_terminal = {signal.SIGINT} if interactive else set()
    child: list[subprocess.Popen[bytes]] = []
    early: list[int] = []  # signals that came before the child existed: delivered once it does

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum in shared_by_terminal:
            return
        if not child:
            early.append(signum)
        elif child[0].poll() is None:
            child[0].send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        child.append(subprocess.Popen(argv, env=dict(env), process_group=None if interactive else 0))
        for signum in early:
            child[0].send_signal(signum)
        return exit_code(child[0].wait())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
