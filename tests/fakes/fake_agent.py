"""A stand-in coding agent for `daari code` tests, installed on PATH under an agent's name (claude, codex...).

It appends one JSON record to $FAKE_AGENT_RECORD: its name, arguments, the environment variables `daari code`
sets, the files of a CODEX_HOME it was given, and the status of GET /healthz at the daari it was pointed at.
With FAKE_AGENT_WAIT set it then writes "ready" into that file and waits for signals, recording each one,
until the first signal ends it, a second later, with 128 + that signal. Otherwise it exits with $FAKE_AGENT_EXIT (0).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ENV_NAMES = ("ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS", "CLAUDE_CODE_MAX_CONTEXT_TOKENS",
             "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "CODEX_HOME", "OPENCODE_CONFIG_CONTENT", "OPENAI_API_BASE",
             "OPENAI_API_KEY")


def daari_url() -> str | None:
    if os.environ.get("ANTHROPIC_BASE_URL"):
        return os.environ["ANTHROPIC_BASE_URL"]
    if os.environ.get("OPENAI_API_BASE"):
        return os.environ["OPENAI_API_BASE"].removesuffix("/v1")
    if os.environ.get("OPENCODE_CONFIG_CONTENT"):
        config = json.loads(os.environ["OPENCODE_CONFIG_CONTENT"])
        return str(config["provider"]["daari"]["options"]["baseURL"]).removesuffix("/v1")
    if os.environ.get("CODEX_HOME"):
        import tomllib

        config = tomllib.loads((Path(os.environ["CODEX_HOME"]) / "config.toml").read_text())
        return str(config["model_providers"]["daari"]["base_url"]).removesuffix("/v1")
    return None


def health(url: str | None) -> int | None:
    if url is None:
        return None
    request = urllib.request.Request(url + "/healthz")
    token_header = os.environ.get("FAKE_AGENT_TOKEN_HEADER")  # the header daari code set for the agent
    if token_header:
        name, value = token_header.split(":", 1)
        request.add_header(name.strip(), value.strip())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


def codex_home_files() -> dict[str, Any]:
    home = os.environ.get("CODEX_HOME")
    if not home:
        return {}
    files: dict[str, Any] = {}
    for entry in sorted(Path(home).iterdir()):
        files[entry.name] = {"link": os.readlink(entry) if entry.is_symlink() else None,
                             "text": entry.read_text() if entry.is_file() else None}
    return files


def main() -> int:
    record = Path(os.environ["FAKE_AGENT_RECORD"])
    url = daari_url()
    headers = os.environ.get("ANTHROPIC_CUSTOM_HEADERS")
    if headers:
        os.environ["FAKE_AGENT_TOKEN_HEADER"] = headers.splitlines()[-1]
    entry = {"agent": Path(sys.argv[0]).name, "args": sys.argv[1:], "pid": os.getpid(), "pgid": os.getpgrp(),
             "env": {name: os.environ[name] for name in ENV_NAMES if name in os.environ},
             "health": health(url), "codex_home": codex_home_files()}
    with record.open("a") as out:
        out.write(json.dumps(entry) + "\n")
    if not os.environ.get("FAKE_AGENT_WAIT"):
        return int(os.environ.get("FAKE_AGENT_EXIT", "0"))
    received: list[str] = []
    signals_file = record.with_suffix(".signals")

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        signals_file.write_text(json.dumps(received))

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    record.with_suffix(".ready").write_text("ready")
    deadline = time.monotonic() + 60
    while not received and time.monotonic() < deadline:
        time.sleep(0.02)
    if not received:
        return 99
    time.sleep(1.0)  # a second copy of the signal (a forwarding bug) arrives well within this
    return 128 + signal.Signals[received[0]].value


if __name__ == "__main__":
    sys.exit(main())
