"""`make run`'s server: `daari serve` on the embedded defaults loads both in-process models (the embedded L3
model and L1's embedding model, at the same time) and reports both ready in /healthz."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import httpx

from tests.test_cli import start_daari


def test_both_embedded_models_load_together_and_l1_is_ready(tmp_path: Path) -> None:
    transcript: list[str] = []
    proc, url = start_daari(["--port", "0", "--data-dir", str(tmp_path / "data")], tmp_path,
                            transcript=transcript)
    assert proc.stdout is not None
    ready = threading.Event()

    def follow() -> None:  # keep reading the log (a full pipe would stall the server)
        assert proc.stdout is not None
        for line in proc.stdout:
            transcript.append(line)
            text = "".join(transcript)
            if "embedded model ready" in text and ("embedding model ready" in text or "L1 disabled" in text):
                ready.set()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        assert ready.wait(180), "".join(transcript)
        health = httpx.get(url + "/healthz", timeout=30).json()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        reader.join(10)
    log = "".join(transcript)
    assert "L1 disabled" not in log and "Traceback" not in log
    assert health["models_loaded"] is True
    assert health["l1"]["state"] == "ready" and health["l1"]["error"] is None
