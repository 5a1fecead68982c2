"""A real full disk: daari's data dir on a small tmpfs that the test fills while daari serves. Every request is
still answered whole, the cache is bypassed (a log line, `daari_cache_write_failures_total`, the bypass
counter), and once space is freed caching resumes. tests/test_cache_bypass.py covers the same with a file size
limit (RLIMIT_FSIZE) where a tmpfs cannot be mounted (it needs root)."""

from __future__ import annotations

import errno
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from bench.crash_safety import ask, config, start
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): test_cache_bypass.py covers a full "
                    "disk with RLIMIT_FSIZE")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write until the disk says it is full (ENOSPC)."""
    filler = disk / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * (1 << 20))
                out.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_a_disk_that_fills_while_serving_is_bypassed_then_used_again(small_disk: Path, tmp_path: Path) -> None:
    with serve_app_in_thread(FakeOpenAI()) as upstream:
        config_path = tmp_path / "daari.yaml"
        config_path.write_text(yaml.safe_dump(config(upstream)))
        server = start(config_path, small_disk / "data", tmp_path)
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                assert ask(client, "before the disk fills", stream=False) is not None
                filler = fill(small_disk)
                for i in range(24):  # each answer echoes its ~8 KiB question: writes that cannot fit
                    prompt = f"question {i} on a full disk: " + "lorem ipsum dolor " * 450
                    got = ask(client, prompt, stream=i % 2 == 1)
                    assert got is not None, f"request {i} not answered whole:\n{server.log_tail()}"
                    assert "lorem ipsum" in got[0]
                metrics = client.get("/metrics").text
                assert client.get("/healthz").status_code == 200
                assert metric(metrics, "daari_cache_write_failures_total") > 0
                assert metric(metrics, 'daari_cache_bypassed_total{op="write"}') > 0
                assert "a write failed" in server.log_path.read_text()
                filler.unlink()  # space again: after its retry delay the cache stores answers again
                deadline = time.monotonic() + 120
                for i in range(10_000):
                    prompt = f"after the disk was freed {i}"
                    assert ask(client, prompt, stream=False) is not None
                    again = ask(client, prompt, stream=False)
                    if again is not None and again[1] == "hit":
                        break
                    assert time.monotonic() < deadline, "the cache never stored an answer again"
                    time.sleep(1)
        finally:
            server.process.terminate()
            server.process.wait(15)
