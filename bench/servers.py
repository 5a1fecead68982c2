"""Start the benchmarked servers as their own processes on 127.0.0.1, wait until they answer, stop them.

Each server (daari, a fake upstream, the bare Hypercorn app) is a separate process with its own interpreter
and GIL. By default the scheduler places them (see `placement`): each server is one thread, so on 2 cores
it can always have a core while the load generator (a few % of a core, measured) uses the other.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
HOST = "127.0.0.1"
CORES = sorted(os.sched_getaffinity(0))  # read once: parts that pin this process must not shrink it


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def placement() -> str:
    """Where processes run (DAARI_BENCH_PLACEMENT): "free" (default) leaves it to the scheduler; "shared"
    puts servers and clients on one core; "split" the servers on the first core, clients on the others."""
    value = os.environ.get("DAARI_BENCH_PLACEMENT", "free")
    if value not in ("shared", "split", "free"):
        raise ValueError(f"DAARI_BENCH_PLACEMENT must be shared, split or free, not {value!r}")
    return value


def server_core() -> set[int] | None:
    """The core the measured servers run on, or None to let the scheduler decide."""
    return None if placement() == "free" else {CORES[0]}


def client_cores() -> set[int] | None:
    """The cores for load generators and upstream fakes."""
    if placement() == "free":
        return None
    if placement() == "split" and len(CORES) >= 2:
        return set(CORES[1:])
    return {CORES[0]}


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    ps: psutil.Process = field(init=False)

    def __post_init__(self) -> None:
        self.ps = psutil.Process(self.process.pid)

    def rss_bytes(self) -> int:
        return int(self.ps.memory_info().rss)

    def cpu_seconds(self) -> float:
        """CPU time used so far by the server and its child processes (daari's decision log writer)."""
        times = self.ps.cpu_times()
        total = times.user + times.system
        for child in self.ps.children(recursive=True):
            try:
                times = child.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return float(total)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _spawn(name: str, argv: list[str], log_dir: Path, cores: set[int] | None,
           env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[subprocess.Popen[bytes], Path]:
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})},
        )
    if cores:
        os.sched_setaffinity(process.pid, cores)
    return process, log_path


def _wait_http(server: Server, path: str, timeout_s: float, ready: Any = None, status: int = 200) -> None:
    """Poll `path` until it answers `status` (and `ready(json)` holds), the process dies, or the time is up."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"{server.name} exited with {server.process.returncode}:\n{server.log_tail()}")
            try:
                response = client.get(server.url + path)
                if response.status_code == status and (ready is None or ready(response.json())):
                    return
                last = f"HTTP {response.status_code}"
            except httpx.TransportError as exc:
                last = type(exc).__name__
            time.sleep(0.1)
    raise RuntimeError(f"{server.name} not ready after {timeout_s:.0f} s ({last}):\n{server.log_tail()}")


def wait_models_loaded(server: Server, timeout_s: float) -> None:
    _wait_http(server, "/healthz", timeout_s, lambda body: body.get("models_loaded") is True)


def stop(server: Server, timeout_s: float = 10.0) -> None:
    """SIGTERM (daari finishes in-flight requests within its grace period), then SIGKILL if it must."""
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(5)


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="daari-bench-") as tmp:
        yield Path(tmp)


@contextlib.contextmanager
def fake_upstream(kind: str, log_dir: Path, *, token_delay_s: float = 0.0,
                  cores: set[int] | None = None, content_length: bool = False, no_gc: bool = False) -> Iterator[Server]:
    """tests/fakes' FakeOpenAI ("openai"), FakeOllama ("ollama") or FakeAnthropic ("anthropic") served by
    Hypercorn in its own process; `content_length`: whole answers with their length; `no_gc`: without the cyclic
    garbage collector (bench/fake_upstream.py)."""
    port = free_port()
    process, log_path = _spawn(f"fake-{kind}-{port}", [
        PYTHON, "-m", "bench.fake_upstream", "--kind", kind, "--port", str(port),
        "--token-delay", str(token_delay_s), *(["--content-length"] if content_length else []),
        *(["--no-gc"] if no_gc else [])], log_dir, cores)
    server = Server(f"fake {kind}", f"http://{HOST}:{port}", process, log_path)
    try:
        if kind == "anthropic":  # it has no GET route: any answer in its shape means it serves
            _wait_http(server, "/v1/models", 30, status=404)
        else:
            _wait_http(server, "/v1/models" if kind == "openai" else "/api/tags", 30)
        yield server
    finally:
        stop(server)


@contextlib.contextmanager
def write_write_upstream(log_dir: Path, *, cores: set[int] | None = None) -> Iterator[Server]:
    """bench/write_write_upstream.py (Python's http.server: head and body in two writes, no TCP_NODELAY)."""
    port = free_port()
    process, log_path = _spawn(f"write-write-{port}", [PYTHON, "-m", "bench.write_write_upstream", "--port",
                                                      str(port)], log_dir, cores)
    server = Server("http.server upstream", f"http://{HOST}:{port}", process, log_path)
    try:
        _wait_http(server, "/v1/models", 30)
        yield server
    finally:
        stop(server)


@contextlib.contextmanager
def bare_app(body: bytes, headers: list[tuple[str, str]], log_dir: Path,
             cores: set[int] | None = None, module: str = "bench.bare_app") -> Iterator[Server]:
    """A server answering `body` to every request: bench/bare_app.py (Hypercorn), or `bench.bare_h11` (no ASGI)."""
    port = free_port()
    body_path, headers_path = log_dir / f"bare-{port}.body", log_dir / f"bare-{port}.headers.json"
    body_path.write_bytes(body)
    headers_path.write_text(json.dumps(headers))
    process, log_path = _spawn(f"bare-{port}", [
        PYTHON, "-m", module, "--port", str(port), "--body-file", str(body_path),
        "--headers-file", str(headers_path)], log_dir, cores)
    server = Server(module.removeprefix("bench."), f"http://{HOST}:{port}", process, log_path)
    try:
        _wait_http(server, "/healthz", 30)
        yield server
    finally:
        stop(server)


@contextlib.contextmanager
def daari(config: dict[str, Any], log_dir: Path, *, cores: set[int] | None = None, ready_timeout_s: float = 180,
          wait_models: bool = False, launcher: list[str] | None = None, tree: Path | None = None) -> Iterator[Server]:
    """`daari serve --config <tmp yaml> --port N --data-dir <tmp>` as a subprocess.

    `launcher` replaces the `daari` command (e.g. `python -m cProfile -o out -m daari` to profile it); `tree`
    serves another checkout of daari (`python -m daari` from there, first on PYTHONPATH) with this venv.
    """
    port = free_port()
    config_path = log_dir / f"daari-{port}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    data_dir = log_dir / f"data-{port}"
    argv = [str(Path(PYTHON).parent / "daari")] if (Path(PYTHON).parent / "daari").exists() and tree is None \
        else [PYTHON, "-m", "daari"]
    env = {"DAARI_LOG_LEVEL": "WARNING", **({"PYTHONPATH": str(tree)} if tree is not None else {})}
    process, log_path = _spawn(f"daari-{port}", [
        *(launcher or argv), "serve", "--config", str(config_path), "--port", str(port),
        "--data-dir", str(data_dir)], log_dir, cores, env=env, cwd=tree or ROOT)
    server = Server("daari", f"http://{HOST}:{port}", process, log_path)
    try:
        # L1's embedding model loads in the background at start: measuring while it loads would charge its CPU
        # to the first rows, so a run starts once it is ready (or off).
        _wait_http(server, "/healthz", ready_timeout_s,
                   lambda body: (not wait_models or body.get("models_loaded") is True)
                   and (body.get("l1") or {}).get("state") != "loading")
        yield server
    finally:
        stop(server)


def openai_tier(base_url: str, model: str, **extra: Any) -> dict[str, Any]:
    return {"executor": "openai", "base_url": base_url + "/v1", "model": model, **extra}


def ollama_tier(base_url: str, model: str, **extra: Any) -> dict[str, Any]:
    return {"executor": "ollama", "base_url": base_url, "model": model, **extra}


def dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def pin(server: Server, cores: set[int] | None) -> None:
    if cores:
        os.sched_setaffinity(server.process.pid, cores)


def l0_hits(server: Server) -> float:
    """daari's own count of L0 hits (GET /metrics), to check that a load run was served from the cache."""
    text = httpx.get(server.url + "/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith("daari_requests_total{") and 'cache="hit"' in line and 'tier="L0"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def gc_pauses(server: Server) -> dict[str, tuple[float, float]]:
    """daari's collector pauses so far (GET /metrics, `daari_gc_pause_seconds`): generation -> (count, seconds)."""
    text = httpx.get(server.url + "/metrics", timeout=30).text
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "daari_gc_pause_seconds":
            for sample in family.samples:
                found.setdefault(sample.labels["generation"], {})[sample.name.rsplit("_", 1)[1]] = sample.value
    return {generation: (values.get("count", 0.0), values.get("sum", 0.0)) for generation, values in found.items()}
