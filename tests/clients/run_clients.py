"""`make test-clients`: the real Claude Code and Codex CLIs, run non-interactively through a running daari
against a fake upstream (`tests/clients/agent_upstream.py`). Each must finish its tool loop, and a repeated
identical run must be answered from L0 (the fake sees no new request). Codex also runs against a
chat-completions tier (its Responses requests translated by daari). Not part of `make test`: it needs
the CLIs from npm (`npm install --prefix .clients @anthropic-ai/claude-code @openai/codex`).

    python -m tests.clients.run_clients [--only claude|codex]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".clients" / "node_modules" / ".bin"
MARKER = "daari-tool-ok"
CLAUDE_PROMPT = f"Run `echo {MARKER}` with Bash and tell me what it printed"
CODEX_SHELL_PROMPT = f"Run echo {MARKER} and tell me what it printed"
CODEX_GOAL_PROMPT = "What is the current goal? Check it with your goal tool."
TIMEOUT_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not come up")


@contextmanager
def process(args: list[str], log: Path, ready_url: str, env: dict[str, str] | None = None) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        try:
            wait_ready(ready_url)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def daari(tmp: Path, name: str, tier: str) -> tuple[list[str], str, Path]:
    port = free_port()
    config = tmp / f"{name}.yaml"
    config.write_text(f"tiers:\n  L3: {tier}\n")
    args = [sys.executable, "-m", "daari", "serve", "--port", str(port), "--config", str(config),
            "--data-dir", str(tmp / f"{name}-data")]
    return args, f"http://127.0.0.1:{port}", tmp / f"{name}.log"


def upstream_counts(url: str) -> dict[str, int]:
    counts: dict[str, int] = httpx.get(url + "/stats").json()
    return counts


def run_cli(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def version(binary: str) -> str:
    return subprocess.run([str(BIN / binary), "--version"], capture_output=True, text=True, timeout=60).stdout.strip()


class Checks:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            self.failures.append(what)


def claude(tmp: Path, upstream: str, checks: Checks) -> None:
    print(f"Claude Code {version('claude')}")
    args, url, log = daari(tmp, "daari-claude", f'{{executor: anthropic, base_url: "{upstream}"}}')
    home, work = tmp / "claude-home", tmp / "claude-work"
    home.mkdir()
    work.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "ANTHROPIC_BASE_URL": url,
           "ANTHROPIC_API_KEY": "sk-ant-test-clients", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1"}
    cli = [str(BIN / "claude"), "-p", CLAUDE_PROMPT, "--allowedTools", "Bash", "--output-format", "json"]
    with process(args, log, url + "/healthz"):
        before = upstream_counts(upstream).get("/v1/messages", 0)
        first: dict[str, Any] = json.loads(run_cli(cli, env, work))
        middle = upstream_counts(upstream).get("/v1/messages", 0)
        checks.check(not first.get("is_error") and MARKER in str(first.get("result")),
                     f"claude -p finished its tool loop ({first.get('num_turns')} turns): {first.get('result')!r}")
        checks.check(middle - before >= 2, f"first run reached the upstream ({middle - before} requests)")
        second: dict[str, Any] = json.loads(run_cli(cli, env, work))
        after = upstream_counts(upstream).get("/v1/messages", 0)
        checks.check(second.get("result") == first.get("result"), "repeated run gave the same answer")
        checks.check(after == middle, f"repeated run served from L0 ({after - middle} upstream requests)")


def claude_strict_template(tmp: Path, checks: Checks) -> None:
    """Claude Code through an OpenAI-compatible tier whose template refuses a system message that is not
    first: daari's refusal, in Anthropic's words, makes Claude Code retry without it."""
    port = free_port()
    upstream = f"http://127.0.0.1:{port}"
    fake = [sys.executable, "-m", "tests.clients.agent_upstream", "--port", str(port), "--strict-system"]
    args, url, log = daari(tmp, "daari-claude-openai", f'{{executor: openai, base_url: "{upstream}/v1"}}')
    home, work = tmp / "claude-home-2", tmp / "claude-work-2"
    home.mkdir()
    work.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "ANTHROPIC_BASE_URL": url,
           "ANTHROPIC_API_KEY": "sk-ant-test-clients", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1"}
    cli = [str(BIN / "claude"), "-p", CLAUDE_PROMPT, "--allowedTools", "Bash", "--output-format", "json"]
    with process(fake, tmp / "upstream-strict.log", upstream + "/stats"), process(args, log, url + "/healthz"):
        result: dict[str, Any] = json.loads(run_cli(cli, env, work))
        checks.check(not result.get("is_error") and MARKER in str(result.get("result")),
                     "claude -p through a translated tier that refuses mid-conversation system messages "
                     f"retried and finished its tool loop: {result.get('result')!r}")


def codex(tmp: Path, upstream: str, checks: Checks) -> None:
    print(f"Codex CLI {version('codex')}")
    args, url, log = daari(tmp, "daari-codex",
                           f'{{executor: openai, base_url: "{upstream}/v1", wire_api: responses}}')
    home, work = tmp / "codex-home", tmp / "codex-work"
    (home / ".codex").mkdir(parents=True)
    work.mkdir()
    (home / ".codex" / "config.toml").write_text(
        'model = "gpt-5.1-codex"\nmodel_provider = "daari"\n\n[model_providers.daari]\nname = "daari"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\n')
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / ".codex")}

    def cli(prompt: str) -> list[str]:
        return [str(BIN / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                prompt]

    with process(args, log, url + "/healthz"):
        before = upstream_counts(upstream).get("/v1/responses", 0)
        shell = run_cli(cli(CODEX_SHELL_PROMPT), env, work)
        middle = upstream_counts(upstream).get("/v1/responses", 0)
        checks.check("printed: " in shell and MARKER in shell.split("printed:", 1)[1],
                     "codex exec ran the shell tool and finished its tool loop")
        checks.check(middle - before >= 2, f"first run reached the upstream ({middle - before} requests)")
        # exec_command output carries a random "Chunk ID", so a repeated shell run's second turn is a
        # (correct) miss; get_goal answers the same every run, so that loop repeats entirely from L0.
        goal = run_cli(cli(CODEX_GOAL_PROMPT), env, work)
        after_goal = upstream_counts(upstream).get("/v1/responses", 0)
        checks.check('"goal"' in goal, "codex exec ran get_goal and finished its tool loop")
        again = run_cli(cli(CODEX_GOAL_PROMPT), env, work)
        after = upstream_counts(upstream).get("/v1/responses", 0)
        checks.check(again.strip().splitlines()[-1] == goal.strip().splitlines()[-1],
                     "repeated run gave the same answer")
        checks.check(after == after_goal, f"repeated run served from L0 ({after - after_goal} upstream requests)")


def codex_translated(tmp: Path, upstream: str, checks: Checks) -> None:
    """Codex against a chat-completions tier: its Responses requests are translated (freeform apply_patch as a
    function, namespaces flattened); the hosted web_search it offers by default is dropped (docs/agents.md)."""
    args, url, log = daari(tmp, "daari-codex-chat", f'{{executor: openai, base_url: "{upstream}/v1"}}')
    home, work = tmp / "codex-chat-home", tmp / "codex-chat-work"
    (home / ".codex").mkdir(parents=True)
    work.mkdir()
    provider = ('model_provider = "daari"\n\n[model_providers.daari]\nname = "daari"\n'
                f'base_url = "{url}/v1"\nwire_api = "responses"\nsupports_websockets = false\n')
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home / ".codex")}
    cli = [str(BIN / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
           CODEX_SHELL_PROMPT]
    with process(args, log, url + "/healthz"):
        # web search stays on (Codex's default): the chat tier answers without it
        (home / ".codex" / "config.toml").write_text('model = "gpt-5.1-codex"\n' + provider)
        before = upstream_counts(upstream).get("/v1/chat/completions", 0)
        shell = run_cli(cli, env, work)
        after = upstream_counts(upstream).get("/v1/chat/completions", 0)
        checks.check("printed: " in shell and MARKER in shell.split("printed:", 1)[1],
                     "codex exec finished its tool loop through a chat-completions tier (translated)")
        checks.check(after - before >= 2, f"the chat-completions upstream answered it ({after - before} requests)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", choices=("claude", "codex"))
    options = parser.parse_args()
    for binary in ("claude", "codex"):
        if not (BIN / binary).exists():
            print(f"{BIN / binary} is missing: npm install --prefix .clients @anthropic-ai/claude-code @openai/codex")
            return 2
    checks = Checks()
    with tempfile.TemporaryDirectory(prefix="daari-clients-") as name:
        tmp = Path(name)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        fake = [sys.executable, "-m", "tests.clients.agent_upstream", "--port", str(port)]
        with process(fake, tmp / "upstream.log", upstream + "/stats"):
            for client, run in (("claude", claude), ("codex", codex), ("codex", codex_translated)):
                if options.only in (None, client):
                    try:
                        run(tmp, upstream, checks)
                        if client == "claude":
                            claude_strict_template(tmp, checks)
                    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                        checks.check(False, f"{client}: {exc}")
    print("all client checks passed" if not checks.failures else f"{len(checks.failures)} check(s) failed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
