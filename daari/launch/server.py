"""The daari `daari code` serves through: one already listening on the port (checked to be daari), or one
it starts in the background and later stops. It never stops a daari it did not start."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import httpx

from daari.datadir import private_file
from daari.launch.target import TOKEN_HEADER

LOG_FILE = "daari.log"  # in the data dir: the background daari's output
START_TIMEOUT_S = 120.0  # a first start loads models and may build caches
POLL_S = 0.2


class Found(Enum):
    NOTHING = "nothing"  # nothing listens on the port
    DAARI = "daari"
    LOCKED = "locked"  # a daari that refuses us its token (none given, or another)
    OTHER = "other"  # something else listens there


class StartError(Exception):
    """daari did not come up (the message says why and where its log is)."""


def _headers(token: str | None) -> dict[str, str]:
    return {TOKEN_HEADER: token} if token else {}


def probe(url: str, token: str | None, timeout_s: float = 2.0) -> Found:
    """What listens at `url`: daari answers GET / with `{"service": "daari"}`."""
    try:
        response = httpx.get(url + "/", headers=_headers(token), timeout=timeout_s)
    except httpx.TransportError:
        return Found.NOTHING
    if response.status_code == 401 and TOKEN_HEADER in response.text:  # daari's guard names its header
        return Found.LOCKED
    try:
        body = response.json()
    except ValueError:
        return Found.OTHER
    return Found.DAARI if isinstance(body, dict) and body.get("service") == "daari" else Found.OTHER


def healthy(url: str, token: str | None) -> bool:
    try:
        return httpx.get(url + "/healthz", headers=_headers(token), timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


@dataclass
class Started:
    """A daari this launch started (the only kind it stops)."""

    process: subprocess.Popen[bytes]
    log: Path
    grace_s: float

    def stop(self) -> None:
        """SIGTERM (daari finishes in-flight requests within its grace period), then SIGKILL."""
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(self.grace_s + 5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(port: int, config_path: str | None, data_dir: Path, grace_s: float) -> Started:
    """`daari serve` on `port` in its own session (a Ctrl-C meant for the agent does not reach it), its output
    appended to <data_dir>/daari.log."""
    log = private_file(data_dir / LOG_FILE)
    argv = [sys.executable, "-m", "daari", "serve", "--port", str(port)]
    if config_path is not None:
        argv += ["--config", config_path]
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return Started(process, log, grace_s)


def wait_ready(url: str, token: str | None, started: Started, timeout_s: float = START_TIMEOUT_S) -> bool:
    """Wait until daari answers /healthz. True: ours is serving; False: ours exited but another daari serves
    the port (two launches raced; that one is used and not ours to stop). Raises StartError otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if started.process.poll() is not None:
            if probe(url, token) is Found.DAARI:
                return False
            raise StartError(f"daari exited with status {started.process.returncode} before it was ready:\n"
                             f"{_tail(started.log)}\n(full log: {started.log})")
        if healthy(url, token):
            return True
        time.sleep(POLL_S)
    started.stop()
    raise StartError(f"daari was not ready on {url} after {timeout_s:.0f} s (log: {started.log})")


def _tail(log: Path, lines: int = 8) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
