"""Run a closed-loop HTTP load against one URL with `wrk` (preferred) or bench.pyload, in its own process.

Both report the same `LoadResult`: completed requests, errors, p50/p99 latency, requests/s, and the CPU the
load generator itself used (so a report can show it did not starve the server on a small machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.servers import PYTHON, ROOT, Server, client_cores

WRK_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {\\"requests\\":%d,\\"duration_us\\":%d,\\"errors\\":%d,\\"non2xx\\":%d,"
    .. "\\"p50_us\\":%d,\\"p99_us\\":%d}\\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass(frozen=True)
class LoadResult:
    tool: str
    connections: int
    requests: int
    duration_s: float
    errors: int
    non2xx: int
    p50_ms: float
    p99_ms: float
    client_cpu_s: float

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    @property
    def client_cpu_pct(self) -> float:
        """CPU the load generator used, in percent of one core."""
        return 100 * self.client_cpu_s / self.duration_s if self.duration_s else 0.0


def tool_name() -> str:
    forced = os.environ.get("DAARI_BENCH_CLIENT")
    if forced in ("wrk", "python"):
        return forced
    return "wrk" if shutil.which("wrk") else "python"


def _lua_literal(text: str) -> str:
    level = "=" * 4
    assert f"]{level}]" not in text
    return f"[{level}[{text}]{level}]"


def run_load(url: str, body: bytes, headers: dict[str, str], *, connections: int, duration_s: float,
             cores: set[int] | None = None) -> LoadResult:
    tool = tool_name()
    with tempfile.TemporaryDirectory(prefix="daari-load-") as tmp:
        if tool == "wrk":
            script = Path(tmp) / "post.lua"
            header_lines = "".join(f"wrk.headers[ {_lua_literal(k)} ] = {_lua_literal(v)}\n"
                                   for k, v in headers.items())
            script.write_text(f'wrk.method = "POST"\nwrk.body = {_lua_literal(body.decode())}\n'
                              f'{header_lines}{WRK_DONE}')
            argv = ["wrk", "-t1", f"-c{connections}", f"-d{duration_s:g}s", "--timeout", "10s",
                    "-s", str(script), url]
        else:
            body_file = Path(tmp) / "body.json"
            body_file.write_bytes(body)
            argv = [PYTHON, "-m", "bench.pyload", "--url", url, "--body-file", str(body_file),
                    "--connections", str(connections), "--duration", str(duration_s),
                    *[a for k, v in headers.items() for a in ("--header", f"{k}: {v}")]]
        out_path = Path(tmp) / "out.txt"
        with open(out_path, "wb") as out:
            process = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        if cores:
            os.sched_setaffinity(process.pid, cores)
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            if process.poll() is None:
                process.kill()
        process.returncode = os.waitstatus_to_exitcode(status)
        text = out_path.read_text(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"{tool} failed ({process.returncode}):\n{text}")
    cpu_s = usage.ru_utime + usage.ru_stime
    if tool == "wrk":
        line = next((ln for ln in text.splitlines() if ln.startswith("WRK_JSON ")), None)
        if line is None:
            raise RuntimeError(f"wrk printed no summary:\n{text}")
        data = json.loads(line.removeprefix("WRK_JSON "))
        return LoadResult("wrk", connections, data["requests"], data["duration_us"] / 1e6, data["errors"],
                          data["non2xx"], data["p50_us"] / 1000, data["p99_us"] / 1000, cpu_s)
    data = json.loads(text.strip().splitlines()[-1])
    return LoadResult("python", connections, data["requests"], data["duration_s"], data["errors"],
                      data["non2xx"], data["p50_ms"], data["p99_ms"], cpu_s)


@dataclass(frozen=True)
class Measured:
    load: LoadResult
    server_cpu_pct: float  # the measured server's CPU over the run, in percent of one core

    @property
    def cpu_us_per_request(self) -> float:
        """The measured server's CPU time per completed request, in microseconds."""
        return self.server_cpu_pct / 100 / self.load.rps * 1e6 if self.load.rps else float("nan")


def measure(server: Server, path: str, body: bytes, headers: dict[str, str], *, connections: int,
            duration_s: float) -> Measured:
    """One load run against `server`, the load generator on the cores the servers do not use."""
    before = server.cpu_seconds()
    load = run_load(server.url + path, body, headers, connections=connections, duration_s=duration_s,
                    cores=client_cores())
    used = server.cpu_seconds() - before
    if load.errors or load.non2xx or not load.requests:
        raise RuntimeError(f"load run against {server.name} had failures: {load}\n{server.log_tail()}")
    return Measured(load, 100 * used / load.duration_s)
