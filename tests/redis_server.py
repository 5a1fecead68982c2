"""A real redis-server (Debian's package) for the tests: each started on a free loopback port, no persistence.

Never a mock. `make test` installs Debian's redis-server when it is missing (CI runs as root); a test that needs
one and cannot find the binary is skipped with that reason, and only then: a Redis that is there but fails to
start fails the test.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

SKIP_REASON = ("redis-server not found: the Redis backend tests need a real Redis (Debian's package: "
               "`apt-get update && apt-get install -y redis-server`; `make test` installs it when run as root)")


# For a module of Redis tests: `pytestmark = needs_redis` (the reason shows in the skip, also for async tests).
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None, reason=SKIP_REASON)


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        pytest.skip(SKIP_REASON)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process; `stop` and `start` again on the same port (a restart loses the data: no
    persistence), `pause` and `resume` (SIGSTOP / SIGCONT: a Redis that does not answer)."""

    def __init__(self, workdir: Path, port: int | None = None, extra: Sequence[str] = (),
                 tls: tuple[Path, Path, Path] | None = None) -> None:
        """`tls`: (certificate, key, CA) files: then the server listens with TLS only, on `port`."""
        self.workdir = workdir
        self.port = port or free_port()
        self.extra = list(extra)
        self.tls = tls
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ports = ["--port", str(self.port)]
        if self.tls is not None:
            cert, key, ca = self.tls
            ports = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(cert), "--tls-key-file",
                     str(key), "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"]
        self.process = subprocess.Popen(
            [redis_binary(), *ports, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir), "--protected-mode", "yes", *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode} on port {self.port}")
            try:
                if self._answers():
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def _answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as raw:
            sock = raw
            if self.tls is not None:
                context = ssl.create_default_context(cafile=str(self.tls[2]))
                context.check_hostname = False
                sock = context.wrap_socket(raw)
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(19)  # SIGSTOP: connections stay open, nothing answers

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(18)  # SIGCONT

    def cli(self, *args: str, user: str | None = None, password: str | None = None) -> str:
        """redis-cli against this server (as an ACL user when given): its output."""
        command = [shutil.which("redis-cli") or "redis-cli", "-p", str(self.port), "--no-auth-warning"]
        if self.tls is not None:
            command += ["--tls", "--cacert", str(self.tls[2])]
        if user is not None:
            command += ["--user", user, "--pass", password or ""]
        return subprocess.run([*command, *args], capture_output=True, text=True, timeout=20).stdout.strip()


@contextmanager
def redis_server(workdir: Path, extra: Sequence[str] = ()) -> Iterator[RedisServer]:
    server = RedisServer(workdir, extra=extra)
    server.start()
    try:
        yield server
    finally:
        server.stop()
