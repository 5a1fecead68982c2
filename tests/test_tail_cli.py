"""`daari tail` as a user runs it: a subprocess following a running daari, across a restart, until Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from tests.support import daari_server, make_config


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def read_until(stream: trio.abc.ReceiveStream, needle: str, seen: list[str]) -> str:
    """Read the process's output until a line containing `needle`; returns that line."""
    with trio.fail_after(60):
        while True:
            lines = "".join(seen).split("\n")
            for index, line in enumerate(lines[:-1]):  # complete lines only
                if needle in line:
                    seen[:] = ["\n".join(lines[index + 1:])]  # keep what came after it
                    return line
            chunk = await stream.receive_some(4096)
            if not chunk:
                raise AssertionError(f"output ended before {needle!r}: {''.join(seen)!r}")
            seen.append(chunk.decode())


async def test_daari_tail_prints_decisions_reconnects_after_a_restart_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    config = make_config(tmp_path, server={"port": port, "grace_period_s": 1}, tail={"buffer": 64})
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # Started with SIGINT ignored, as a shell's `&` or another test runner may leave it: Ctrl-C still works.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "daari", "tail", "--url", url, "--no-color", "--tier", "L2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert process.stdout is not None and process.stderr is not None
    out: list[str] = []
    err: list[str] = []
    try:
        for round_ in range(2):  # the second server is a restart on the same port
            async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
                with trio.fail_after(60):
                    while server.parts.tail.open < 1:
                        await trio.sleep(0.05)
                await client.post("/v1/chat/completions", json={"model": "m", "messages": [
                    {"role": "user", "content": f"Format as JSON: {{round: {round_}}}"}]})
                line = await read_until(process.stdout, " L2 ", out)
                # time, tier, cache, task type, latency, rule id, prompt hash: one line per decision
                fields = line.split()
                assert fields[1:4] == ["L2", "miss", "rule"] and fields[4].endswith("ms")
                assert fields[5].startswith("L2") and fields[6].startswith("#")
            if round_ == 0:
                await read_until(process.stderr, "reconnecting", err)
        process.send_signal(signal.SIGINT)
        with trio.fail_after(30):
            code = await process.wait()
        rest = (await process.stderr.receive_some(65536)).decode()
    finally:
        if process.returncode is None:
            process.kill()
    assert code == 0
    assert "Traceback" not in rest
