"""`daari code` as a user runs it: a real subprocess, a stand-in agent on PATH (tests/fakes/fake_agent.py), a
real daari found on the port or started by the launcher, and real signals."""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from daari.server.serve import RunningServer
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config

FAKE_AGENT = Path(__file__).parent / "fakes" / "fake_agent.py"
DEAD_UPSTREAM = "http://127.0.0.1:9/v1"  # nothing listens there; these tests never route a request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_until(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


class Setup:
    """A user's machine: a home, the stand-in agents on PATH, a daari.yaml, and the agents' records."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.bin = root / "bin"
        self.bin.mkdir()
        for name in ("claude", "codex", "opencode", "aider"):
            shim = self.bin / name
            shim.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(FAKE_AGENT)!r}, "
                            "run_name='__main__')\n")
            shim.chmod(0o755)
        self.data = root / "data"
        self.config = root / "daari.yaml"
        self.write_config()
        self.record = root / "agent.jsonl"
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.home), "FAKE_AGENT_RECORD": str(self.record),
                    "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1",
                    "OMP_WAIT_POLICY": "PASSIVE", "XDG_DATA_HOME": str(root / "xdg")}

    def write_config(self, **tier: Any) -> None:
        extra = "".join(f", {k}: {v}" for k, v in tier.items())
        self.config.write_text(f"data_dir: {self.data}\ncache:\n  l1: {{enabled: false}}\n"
                               f"server:\n  grace_period_s: 2\n"
                               f"tiers:\n  L3: {{executor: openai, base_url: '{DEAD_UPSTREAM}'{extra}}}\n")

    def argv(self, agent: str, port: int, *agent_args: str) -> list[str]:
        return [sys.executable, "-m", "daari", "code", agent, "--config", str(self.config), "--port", str(port),
                "--", *agent_args]

    def run(self, agent: str, port: int, *agent_args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(agent, port, *agent_args), env={**self.env, **env}, cwd=self.root,
                              capture_output=True, text=True, timeout=240)

    def records(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


@pytest.fixture(scope="module")
def running_daari(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A daari the user started themselves (the launcher must use it and leave it running)."""
    config = make_config(tmp_path_factory.mktemp("running"), cache={"l1": {"enabled": False}},
                         tiers={"L3": {"executor": "openai", "base_url": DEAD_UPSTREAM}})
    with daari_in_thread(config) as server:
        yield server


def test_starts_daari_runs_the_agent_with_its_arguments_and_stops_daari_after(setup: Setup) -> None:
    port = free_port()
    done = setup.run("claude", port, "-p", "hello there", "--model", "sonnet", FAKE_AGENT_EXIT="7")
    assert done.returncode == 7, done.stderr  # the agent's exit code is daari code's
    [agent] = setup.records()
    assert agent["args"] == ["-p", "hello there", "--model", "sonnet"]
    assert agent["env"]["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{port}"
    assert agent["health"] == 200  # daari was up and healthy while the agent ran
    assert not listening(port)  # it started daari, so it stopped it
    log = (setup.data / "daari.log").read_text()
    assert f"daari listening on http://127.0.0.1:{port}" in log
    assert (setup.data / "daari.log").stat().st_mode & 0o777 == 0o600
    assert f"starting daari on http://127.0.0.1:{port}" in done.stderr


def test_uses_a_daari_already_serving_and_leaves_it_running(setup: Setup, running_daari: RunningServer) -> None:
    port = port_of(running_daari.url)
    done = setup.run("claude", port, "-p", "hi")
    assert done.returncode == 0, done.stderr
    assert "using the daari serving on" in done.stderr
    [agent] = setup.records()
    assert agent["health"] == 200
    assert httpx.get(running_daari.url + "/healthz").status_code == 200  # not stopped: not its to stop
    assert not (setup.data / "daari.log").exists()  # nothing was started


def test_something_else_on_the_port_is_not_mistaken_for_daari(setup: Setup) -> None:
    with serve_app_in_thread(FakeOpenAI()) as url:
        done = setup.run("claude", port_of(url))
    assert done.returncode == 1
    assert "something other than daari listens on" in done.stderr
    assert setup.records() == []


def test_a_missing_agent_gets_one_line_saying_how_to_install_it(setup: Setup) -> None:
    (setup.bin / "codex").unlink()
    done = setup.run("codex", free_port())
    assert done.returncode == 127
    assert done.stderr.strip().splitlines() == [
        "daari code: codex is not installed (or not on PATH): npm install -g @openai/codex"]


def test_agent_arguments_go_after_the_separator(setup: Setup) -> None:
    done = subprocess.run([sys.executable, "-m", "daari", "code", "claude", "-p", "hi"], env=setup.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "daari code claude -- -p hi" in done.stderr


def test_sigterm_reaches_the_agent_once_and_the_daari_it_started_stops(setup: Setup) -> None:
    port = free_port()
    launcher = subprocess.Popen(setup.argv("codex", port), env={**setup.env, "FAKE_AGENT_WAIT": "1"},
                                cwd=setup.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: setup.record.with_suffix(".ready").exists(), timeout=180)
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(60) == 128 + signal.SIGTERM
    finally:
        launcher.kill()
        launcher.wait()
    assert json.loads(setup.record.with_suffix(".signals").read_text()) == ["SIGTERM"]
    assert not listening(port)


@pytest.mark.parametrize("to_group", [False, True], ids=["to-launcher", "to-its-process-group"])
def test_without_a_terminal_sigint_is_forwarded_exactly_once(setup: Setup, running_daari: RunningServer,
                                                             to_group: bool) -> None:
    launcher = subprocess.Popen(setup.argv("aider", port_of(running_daari.url)),
                                env={**setup.env, "FAKE_AGENT_WAIT": "1"}, cwd=setup.root, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_until(lambda: setup.record.with_suffix(".ready").exists())
        if to_group:  # e.g. a CI job's timeout signalling the whole group: the agent must not get two
            os.killpg(launcher.pid, signal.SIGINT)
        else:
            launcher.send_signal(signal.SIGINT)
        assert launcher.wait(30) == 128 + signal.SIGINT
    finally:
        launcher.kill()
        launcher.wait()
    assert json.loads(setup.record.with_suffix(".signals").read_text()) == ["SIGINT"]
    [agent] = setup.records()
    assert agent["pgid"] != launcher.pid  # its own group: only daari code's forwarding reaches it


def test_at_a_terminal_ctrl_c_reaches_the_agent_once(setup: Setup, running_daari: RunningServer) -> None:
    """The agent shares the terminal's foreground group, so the terminal's Ctrl-C reaches it directly and
    daari code does not send a second copy (a second Ctrl-C means "quit now" to Claude Code and Codex)."""
    pid, master = pty.fork()
    if pid == 0:  # the child: a session with the pty as its controlling terminal, like a shell's job
        os.execve(sys.executable, setup.argv("claude", port_of(running_daari.url)),
                  {**setup.env, "FAKE_AGENT_WAIT": "1"})
    output = bytearray()
    try:
        def ready() -> bool:
            try:
                output.extend(os.read(master, 4096))
            except (BlockingIOError, OSError):
                pass
            return setup.record.with_suffix(".ready").exists()

        os.set_blocking(master, False)
        wait_until(ready)
        os.write(master, b"\x03")  # Ctrl-C typed at the terminal
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGINT, output.decode(errors="replace")
    assert json.loads(setup.record.with_suffix(".signals").read_text()) == ["SIGINT"]
    [agent] = setup.records()
    assert agent["pgid"] == pid  # the launcher's own group: the terminal's foreground job
    assert agent["health"] == 200


def test_codex_gets_an_overlay_keeping_the_users_config_and_auth(setup: Setup, running_daari: RunningServer
                                                                 ) -> None:
    user = setup.home / ".codex"
    user.mkdir()
    (user / "config.toml").write_text(
        'model = "gpt-5.1-codex"\nmodel_provider = "openai"\napproval_policy = "on-request"\n\n'
        '[profiles.fast]\nmodel = "gpt-5.1-codex-mini"\nmodel_provider = "openai"\n\n'
        '[profiles.plain]\nmodel = "o3"\n\n'
        '[mcp_servers.docs]\ncommand = "docs-mcp"\nargs = ["--stdio"]\n\n'
        '[model_providers.other]\nname = "other"\nbase_url = "https://example.invalid/v1"\n')
    (user / "auth.json").write_text('{"OPENAI_API_KEY": "sk-user"}')
    (user / "sessions").mkdir()
    port = port_of(running_daari.url)
    done = setup.run("codex", port, "exec", "fix it", OPENAI_API_KEY="sk-env")
    assert done.returncode == 0, done.stderr
    [agent] = setup.records()
    overlay = Path(agent["env"]["CODEX_HOME"])
    assert overlay == setup.data / "codex-home"
    config = tomllib.loads(agent["codex_home"]["config.toml"]["text"])
    assert config["model_provider"] == "daari"
    assert config["model_providers"]["daari"] == {
        "name": "daari", "base_url": f"http://127.0.0.1:{port}/v1", "wire_api": "responses",
        "supports_websockets": False, "env_key": "OPENAI_API_KEY"}
    # Everything of the user's is kept; a profile that picked a provider now picks daari.
    assert config["model"] == "gpt-5.1-codex" and config["approval_policy"] == "on-request"
    assert config["profiles"] == {"fast": {"model": "gpt-5.1-codex-mini", "model_provider": "daari"},
                                  "plain": {"model": "o3"}}
    assert config["mcp_servers"] == {"docs": {"command": "docs-mcp", "args": ["--stdio"]}}
    assert config["model_providers"]["other"]["base_url"] == "https://example.invalid/v1"
    assert agent["codex_home"]["auth.json"]["link"] == str(user / "auth.json")
    assert agent["codex_home"]["sessions"]["link"] == str(user / "sessions")
    assert agent["args"] == ["exec", "fix it"]
    assert (user / "config.toml").read_text().startswith('model = "gpt-5.1-codex"')  # the user's file untouched
    assert (overlay / "config.toml").stat().st_mode & 0o777 == 0o600

    # The next launch follows the user's home: a new file is linked, a removed one's link goes.
    (user / "AGENTS.md").write_text("be brief")
    (user / "auth.json").unlink()
    assert setup.run("codex", port).returncode == 0
    second = setup.records()[1]["codex_home"]
    assert second["AGENTS.md"]["link"] == str(user / "AGENTS.md")
    assert "auth.json" not in second


def test_codex_without_a_config_of_its_own(setup: Setup, running_daari: RunningServer) -> None:
    done = setup.run("codex", port_of(running_daari.url), "exec", "hi")
    assert done.returncode == 0, done.stderr
    [agent] = setup.records()
    config = tomllib.loads(agent["codex_home"]["config.toml"]["text"])
    assert config["model_provider"] == "daari" and "env_key" not in config["model_providers"]["daari"]
    assert agent["health"] == 200


def test_a_broken_codex_config_is_named(setup: Setup, running_daari: RunningServer) -> None:
    (setup.home / ".codex").mkdir()
    (setup.home / ".codex" / "config.toml").write_text("model = \n")
    done = setup.run("codex", port_of(running_daari.url))
    assert done.returncode == 2
    assert f"cannot read {setup.home / '.codex' / 'config.toml'}" in done.stderr
    assert setup.records() == []


def test_opencode_gets_a_daari_provider_merged_over_its_inline_config(setup: Setup,
                                                                      running_daari: RunningServer) -> None:
    port = port_of(running_daari.url)
    users = json.dumps({"theme": "dark", "provider": {"daari": {"options": {"timeout": 5000}}}})
    done = setup.run("opencode", port, "run", "hi", OPENCODE_CONFIG_CONTENT=users)
    assert done.returncode == 0, done.stderr
    [agent] = setup.records()
    config = json.loads(agent["env"]["OPENCODE_CONFIG_CONTENT"])
    assert config["theme"] == "dark"
    daari = config["provider"]["daari"]
    assert daari["npm"] == "@ai-sdk/openai-compatible"
    assert daari["options"] == {"timeout": 5000, "baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "daari"}
    assert config["model"] == config["small_model"] == "daari/daari"
    assert agent["health"] == 200 and agent["args"] == ["run", "hi"]


def test_aider_gets_the_base_url_first_and_a_placeholder_key(setup: Setup, running_daari: RunningServer) -> None:
    port = port_of(running_daari.url)
    done = setup.run("aider", port, "--model", "openai/gpt-4.1", "--yes-always")
    assert done.returncode == 0, done.stderr
    [agent] = setup.records()
    base = f"http://127.0.0.1:{port}/v1"
    assert agent["args"] == ["--openai-api-base", base, "--model", "openai/gpt-4.1", "--yes-always"]
    assert agent["env"]["OPENAI_API_BASE"] == base and agent["env"]["OPENAI_API_KEY"] == "daari"
    assert agent["health"] == 200


def test_claude_code_is_told_the_tiers_context_window(setup: Setup, running_daari: RunningServer) -> None:
    setup.write_config(context_window=131072)
    assert setup.run("claude", port_of(running_daari.url)).returncode == 0
    setup.write_config(context_window=400000)
    assert setup.run("claude", port_of(running_daari.url), CLAUDE_CODE_AUTO_COMPACT_WINDOW="300000").returncode == 0
    setup.write_config(context_window=32768)
    assert setup.run("claude", port_of(running_daari.url)).returncode == 0
    setup.write_config(context_window=1000000)
    assert setup.run("claude", port_of(running_daari.url)).returncode == 0
    setup.write_config()
    assert setup.run("claude", port_of(running_daari.url)).returncode == 0
    small, users, tiny, full, unknown = (r["env"] for r in setup.records())
    assert small["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "131072"
    assert small["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "131072"  # compacts before the tier's window
    assert users["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "400000"
    assert users["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "300000"  # the user's own setting wins
    assert tiny["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "100000"  # the least Claude Code accepts
    assert full["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == "1000000"
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in full  # as large as Claude Code's own: nothing to cap
    assert "CLAUDE_CODE_MAX_CONTEXT_TOKENS" not in unknown and "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in unknown


def test_with_daari_token_every_agent_sends_it(setup: Setup, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_TOKEN", "t0ken-for-tests-123")
    config = make_config(tmp_path / "tok", cache={"l1": {"enabled": False}},
                         tiers={"L3": {"executor": "openai", "base_url": DEAD_UPSTREAM}})
    with daari_in_thread(config) as server:
        port = port_of(server.url)
        assert httpx.get(server.url + "/healthz").status_code == 401
        env = {"DAARI_TOKEN": "t0ken-for-tests-123"}
        for agent in ("claude", "codex", "aider"):
            done = setup.run(agent, port, **env)
            assert done.returncode == 0, done.stderr
        missing = setup.run("claude", port)  # the user forgot the token: told so, not "something else"
        wrong = setup.run("claude", port, DAARI_TOKEN="not-the-token")
    assert missing.returncode == wrong.returncode == 1
    assert f"daari code: the daari on http://127.0.0.1:{port} needs its token: set DAARI_TOKEN" in missing.stderr
    assert f"daari code: the daari on http://127.0.0.1:{port} refuses the token in DAARI_TOKEN" in wrong.stderr
    claude, codex, aider = setup.records()
    assert claude["env"]["ANTHROPIC_CUSTOM_HEADERS"] == "x-daari-token: t0ken-for-tests-123"
    assert claude["health"] == 200  # the header it was given opens daari
    codex_config = tomllib.loads(codex["codex_home"]["config.toml"]["text"])
    assert codex_config["model_providers"]["daari"]["env_http_headers"] == {"x-daari-token": "DAARI_TOKEN"}
    assert "t0ken" not in codex["codex_home"]["config.toml"]["text"]  # the file names the variable only
    assert aider["env"]["OPENAI_API_KEY"] == "t0ken-for-tests-123"  # daari takes it as Authorization: Bearer


def test_sigterm_while_daari_starts_stops_it_too(setup: Setup) -> None:
    """Before the agent runs, a SIGTERM ends daari code through its clean-up: the daari it began starting is
    stopped, never left running on its own."""
    port = free_port()
    launcher = subprocess.Popen(setup.argv("claude", port), env=setup.env, cwd=setup.root,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (setup.data / "daari.log").exists(), timeout=60)  # made just before daari starts
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(60) == 128 + signal.SIGTERM
    finally:
        launcher.kill()
        launcher.wait()
    left = [p for p in psutil.process_iter(["cmdline"]) if str(setup.config) in " ".join(p.info["cmdline"] or [])]
    assert left == []
    assert not listening(port)
    assert setup.records() == []  # the agent never ran
