"""`make test-clients`: the real Claude Code, Codex, opencode and aider, each with its default model and
settings, run non-interactively through daari against a fake upstream (`tests/clients/agent_upstream.py`),
then `daari code claude` and `daari code codex` as a new user runs them, and each client once through the
kinds of tier its protocol is translated to. Each must finish its tool loop (for
aider, an edit applied to a file), and a repeated run must be answered from L0 wherever the client sends the
same bytes again. Not part of `make test`: it needs the CLIs from npm and aider from PyPI
(`npm install --prefix .clients @anthropic-ai/claude-code @openai/codex opencode-ai`,
`python3 -m venv .clients/aider && .clients/aider/bin/pip install aider-chat`).

    python -m tests.clients.run_clients [--only claude|codex|opencode|aider|daari-code|cross]
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support import FRONT_END_ENV

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".clients" / "node_modules" / ".bin"
AIDER = REPO / ".clients" / "aider" / "bin" / "aider"
MARKER = "daari-tool-ok"
CLAUDE_PROMPT = f"Run `echo {MARKER}` with Bash and tell me what it printed"
CODEX_PROMPT = f"Run echo {MARKER} and tell me what it printed"
OPENCODE_PROMPT = f"Run echo {MARKER} with bash and tell me what it printed"
AIDER_PROMPT = f"Change greeting.txt to say {MARKER}"
TIMEOUT_S = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) == 0


def wait_ready(url: str) -> None:
    deadline = time.monotonic() + 180
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


def daari_config(tmp: Path, name: str, tier: str) -> Path:
    config = tmp / f"{name}.yaml"
    # DAARI_TEST_FRONT_END=h11 (tests/support.py): the clients through the opt-in h11 front end
    front_end = os.environ.get(FRONT_END_ENV)
    server = f"server:\n  front_end: {front_end}\n" if front_end else ""
    config.write_text(f"data_dir: {tmp / (name + '-data')}\n{server}tiers:\n  L3: {tier}\n")
    return config


@contextmanager
def daari(tmp: Path, name: str, tier: str) -> Iterator[str]:
    """`daari serve` with one tier (the fake upstream), its own data dir; yields its URL."""
    port = free_port()
    config = daari_config(tmp, name, tier)
    url = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "daari", "serve", "--port", str(port), "--config", str(config)]
    with process(args, tmp / f"{name}.log", url + "/healthz"):
        yield url


def upstream_counts(url: str) -> dict[str, int]:
    counts: dict[str, int] = httpx.get(url + "/stats").json()
    return counts


def run_cli(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def version(binary: Path) -> str:
    return subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=120).stdout.strip()


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """A new user's environment: their own home, the clients on PATH, nothing else of ours."""
    path = f"{BIN}:{AIDER.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    env = {"PATH": path, "HOME": str(home), "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO)),
           "HF_HUB_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    return {**env, **extra}


def dirs(tmp: Path, name: str) -> tuple[Path, Path]:
    home, work = tmp / f"{name}-home", tmp / f"{name}-work"
    home.mkdir()
    work.mkdir()
    return home, work


class Checks:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            self.failures.append(what)


def loop_and_repeat(checks: Checks, upstream: str, path: str, run: Callable[[], str], finished: Callable[[str], bool],
                    what: str, repeat_misses: int = 0, why: str = "") -> None:
    """Run a client twice: the first must finish its tool loop through the upstream, the second too, with no
    request it had sent before reaching the upstream again. Requests whose bodies the client had not sent before
    rightly miss L0: `repeat_misses` of them are expected (why says what differs: Codex's exec output carries its
    wall time), others are a client's own variation (aider adds `max_tokens` once its model lookup answers) and
    are listed. The repeated run must still ask the upstream less than the first, so new bodies alone cannot pass."""
    before = upstream_counts(upstream).get(path, 0)
    first = run()
    middle = upstream_counts(upstream).get(path, 0)
    checks.check(finished(first), f"{what}: the tool loop finished")
    checks.check(middle - before >= 2, f"{what}: the first run reached the upstream ({middle - before} requests)")
    second = run()
    after = upstream_counts(upstream).get(path, 0)
    checks.check(finished(second), f"{what}: the repeated run finished too")
    misses = after - middle
    new_bodies = explain_misses(upstream, path, misses) if misses else 0
    expected = "all of it from L0" if repeat_misses == 0 else f"L0 but for at most {repeat_misses} request(s): {why}"
    if new_bodies > repeat_misses:
        expected += f"; {new_bodies} request(s) the client had not sent before"
    # At most: when the differing part comes out the same (exec's wall time rounds alike), L0 rightly hits it.
    # A body sent before that reaches the upstream again always fails: that one daari should have served.
    checks.check(new_bodies == misses and misses < middle - before,
                 f"{what}: repeated run served {expected} ({misses} upstream requests)")


def explain_misses(upstream: str, path: str, misses: int) -> int:
    """Print the repeated run's upstream requests and whether an identical body came before: a body seen before
    that reached the upstream again is one daari did not keep; a new body is the client's doing. Returns how many
    were new bodies."""
    seen: list[dict[str, str]] = [s for s in httpx.get(upstream + "/seen").json()["requests"] if s["path"] == path]
    earlier = {s["body"] for s in seen[:-misses]}
    new = 0
    for request in seen[-misses:]:
        resent = request["body"] in earlier
        new += not resent
        kind = "same body as an earlier request" if resent else "a body not sent before"
        print(f"       {kind}: last message {request['last']}", flush=True)
    return new


# ---------------------------------------------------------------- Claude Code


def claude_env(home: Path, url: str) -> dict[str, str]:
    return base_env(home, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="sk-ant-test-clients",
                    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")


CLAUDE_ARGS = ["-p", CLAUDE_PROMPT, "--allowedTools", "Bash", "--output-format", "json"]


def claude_result(output: str) -> str:
    result: dict[str, Any] = json.loads(output)
    return "" if result.get("is_error") else str(result.get("result"))


def claude(tmp: Path, upstream: str, checks: Checks) -> None:
    print(f"Claude Code {version(BIN / 'claude')}", flush=True)
    home, work = dirs(tmp, "claude")
    with daari(tmp, "daari-claude", f'{{executor: anthropic, base_url: "{upstream}"}}') as url:
        cli = [str(BIN / "claude"), *CLAUDE_ARGS]
        env = claude_env(home, url)
        loop_and_repeat(checks, upstream, "/v1/messages", lambda: claude_result(run_cli(cli, env, work)),
                        lambda result: MARKER in result, "claude -p through an anthropic tier")


def claude_strict_template(tmp: Path, _upstream: str, checks: Checks) -> None:
    """Claude Code through an OpenAI-compatible tier whose template refuses a system message that is not
    first: daari's refusal, in Anthropic's words, makes Claude Code retry without it."""
    port = free_port()
    upstream = f"http://127.0.0.1:{port}"
    fake = [sys.executable, "-m", "tests.clients.agent_upstream", "--port", str(port), "--strict-system"]
    home, work = dirs(tmp, "claude-strict")
    with process(fake, tmp / "upstream-strict.log", upstream + "/stats"), \
            daari(tmp, "daari-claude-openai", f'{{executor: openai, base_url: "{upstream}/v1"}}') as url:
        result = claude_result(run_cli([str(BIN / "claude"), *CLAUDE_ARGS], claude_env(home, url), work))
        checks.check(MARKER in result, "claude -p through a translated tier that refuses mid-conversation system "
                                       f"messages retried and finished its tool loop: {result!r}")


# ---------------------------------------------------------------- Codex

CODEX_PROVIDER = ('model_provider = "daari"\n\n[model_providers.daari]\nname = "daari"\n'
                  'base_url = "{url}/v1"\nwire_api = "responses"\nsupports_websockets = false\n')
# With its default model Codex runs commands through `exec` (JavaScript), whose output starts with the
# script's wall time: the repeated run's second turn carries a new tool result, so it is correctly a miss.
EXEC_WALL_TIME = "exec's output carries its wall time"


def codex_run(home: Path, work: Path) -> Callable[[], str]:
    args = [str(BIN / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
            CODEX_PROMPT]
    return lambda: run_cli(args, base_env(home, CODEX_HOME=str(home / ".codex")), work)


def codex_finished(output: str) -> bool:
    return "printed: " in output and MARKER in output.split("printed:", 1)[1]


def codex(tmp: Path, upstream: str, checks: Checks) -> None:
    """Codex with its default model and default settings: only the provider added to config.toml."""
    print(f"Codex CLI {version(BIN / 'codex')}", flush=True)
    for name, tier, path in (
            ("responses", f'{{executor: openai, base_url: "{upstream}/v1", wire_api: responses}}', "/v1/responses"),
            ("chat", f'{{executor: openai, base_url: "{upstream}/v1"}}', "/v1/chat/completions")):
        home, work = dirs(tmp, f"codex-{name}")
        (home / ".codex").mkdir()
        with daari(tmp, f"daari-codex-{name}", tier) as url:
            (home / ".codex" / "config.toml").write_text(CODEX_PROVIDER.format(url=url))
            loop_and_repeat(checks, upstream, path, codex_run(home, work), codex_finished,
                            f"codex exec, default model, through a {name} tier", 1, EXEC_WALL_TIME)


# ---------------------------------------------------------------- opencode

OPENCODE_CONFIG = {"$schema": "https://opencode.ai/config.json",
                   "provider": {"daari": {"npm": "@ai-sdk/openai-compatible", "name": "daari",
                                          "options": {"baseURL": "{url}/v1"}, "models": {"daari": {}}}},
                   "model": "daari/daari"}


def opencode(tmp: Path, upstream: str, checks: Checks) -> None:
    """opencode set up as docs/agents.md says: a provider in opencode.json (in the project), nothing else."""
    print(f"opencode {version(BIN / 'opencode')}", flush=True)
    home, work = dirs(tmp, "opencode")
    with daari(tmp, "daari-opencode", f'{{executor: openai, base_url: "{upstream}/v1"}}') as url:
        (work / "opencode.json").write_text(json.dumps(OPENCODE_CONFIG).replace("{url}", url))
        args = [str(BIN / "opencode"), "run", OPENCODE_PROMPT]
        loop_and_repeat(checks, upstream, "/v1/chat/completions", lambda: run_cli(args, base_env(home), work),
                        lambda out: f"printed: {MARKER}" in out, "opencode run through a chat tier")


# ---------------------------------------------------------------- aider


def aider(tmp: Path, upstream: str, checks: Checks) -> None:
    """aider with its default model (chosen from the OpenAI key it finds) and the base URL flag: it must apply
    the SEARCH/REPLACE edit the upstream answers. Each run starts from the same fresh directory."""
    print(f"aider {version(AIDER)}", flush=True)
    home = tmp / "aider-home"
    home.mkdir()
    runs = iter(range(100))

    def run(url: str) -> str:
        work = tmp / f"aider-work-{next(runs)}"
        work.mkdir()
        (work / "greeting.txt").write_text("hello\n")
        run_cli([str(AIDER), "--openai-api-base", f"{url}/v1", "--message", AIDER_PROMPT, "--yes-always",
                 "greeting.txt"], base_env(home, OPENAI_API_KEY="sk-test-clients"), work)
        return (work / "greeting.txt").read_text()

    with daari(tmp, "daari-aider", f'{{executor: openai, base_url: "{upstream}/v1"}}') as url:
        loop_and_repeat(checks, upstream, "/v1/chat/completions", lambda: run(url),
                        lambda text: text.strip() == MARKER, "aider (default model) edit through a chat tier")


# ---------------------------------------------------------------- daari code


def daari_code(tmp: Path, upstream: str, checks: Checks) -> None:
    """`daari code claude` and `daari code codex` on a port where nothing listens: each run starts daari (the
    same data dir, so the second run's answers come from L0 on disk), runs the agent and stops daari."""
    daari_code_agent(tmp, upstream, checks, "claude", f'{{executor: anthropic, base_url: "{upstream}"}}',
                     "/v1/messages")
    daari_code_agent(tmp, upstream, checks, "codex",
                     f'{{executor: openai, base_url: "{upstream}/v1", wire_api: responses}}', "/v1/responses")


def daari_code_agent(tmp: Path, upstream: str, checks: Checks, agent: str, tier: str, path: str) -> None:
    home, work = dirs(tmp, f"daari-code-{agent}")
    config = daari_config(tmp, f"daari-code-{agent}", tier)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if agent == "codex":  # a user's own Codex config and login, which the overlay must keep
        (home / ".codex").mkdir()
        (home / ".codex" / "config.toml").write_text('model_reasoning_effort = "high"\n')
        (home / ".codex" / "auth.json").write_text('{"OPENAI_API_KEY": null}')
        agent_args = ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", CODEX_PROMPT]
        env = base_env(home)
    else:
        agent_args = CLAUDE_ARGS
        env = base_env(home, ANTHROPIC_API_KEY="sk-ant-test-clients", DISABLE_AUTOUPDATER="1",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    args = [sys.executable, "-m", "daari", "code", agent, "--config", str(config), "--port", str(port), "--",
            *agent_args]

    def run() -> str:
        output = run_cli(args, env, work)
        checks.check(not listening(url), f"daari code {agent} stopped the daari it started")
        return output

    if agent == "claude":
        loop_and_repeat(checks, upstream, path, run, lambda out: MARKER in claude_result(out), "daari code claude")
    else:
        loop_and_repeat(checks, upstream, path, run, codex_finished, "daari code codex", 1, EXEC_WALL_TIME)


# ---------------------------------------------------------------- every client through every kind of tier

TIERS = {"anthropic": ('{{executor: anthropic, base_url: "{up}"}}', "/v1/messages"),
         "responses": ('{{executor: openai, base_url: "{up}/v1", wire_api: responses}}', "/v1/responses"),
         "chat": ('{{executor: openai, base_url: "{up}/v1"}}', "/v1/chat/completions")}
CROSSED = (("claude", "responses"), ("claude", "chat"), ("codex", "anthropic"), ("opencode", "anthropic"),
           ("opencode", "responses"), ("aider", "anthropic"), ("aider", "responses"))


def cross(tmp: Path, upstream: str, checks: Checks) -> None:
    """Each client once through the kinds of tier its protocol is translated to (the groups above run each
    through its own protocol's tier): the tool loop must finish with the upstream's answer."""
    for client, kind in CROSSED:
        try:
            cross_one(tmp, upstream, checks, client, kind)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            checks.check(False, f"{client} through a {kind} tier: {exc}")


def cross_one(tmp: Path, upstream: str, checks: Checks, client: str, kind: str) -> None:
    tier, path = TIERS[kind]
    home, work = dirs(tmp, f"cross-{client}-{kind}")
    before = upstream_counts(upstream).get(path, 0)
    with daari(tmp, f"daari-cross-{client}-{kind}", tier.format(up=upstream)) as url:
        if client == "claude":
            done = MARKER in claude_result(run_cli([str(BIN / "claude"), *CLAUDE_ARGS], claude_env(home, url),
                                                   work))
        elif client == "codex":
            (home / ".codex").mkdir()
            (home / ".codex" / "config.toml").write_text(CODEX_PROVIDER.format(url=url))
            done = codex_finished(codex_run(home, work)())
        elif client == "opencode":
            (work / "opencode.json").write_text(json.dumps(OPENCODE_CONFIG).replace("{url}", url))
            done = f"printed: {MARKER}" in run_cli([str(BIN / "opencode"), "run", OPENCODE_PROMPT],
                                                   base_env(home), work)
        else:
            (work / "greeting.txt").write_text("hello\n")
            run_cli([str(AIDER), "--openai-api-base", f"{url}/v1", "--message", AIDER_PROMPT, "--yes-always",
                     "greeting.txt"], base_env(home, OPENAI_API_KEY="sk-test-clients"), work)
            done = (work / "greeting.txt").read_text().strip() == MARKER
    reached = upstream_counts(upstream).get(path, 0) - before
    article = "an" if kind == "anthropic" else "a"
    checks.check(done and reached >= 2, f"{client} through {article} {kind} tier (translated): the tool loop "
                                        f"finished ({reached} upstream requests)")


CLIENTS: dict[str, list[Callable[[Path, str, Checks], None]]] = {
    "claude": [claude, claude_strict_template], "codex": [codex], "opencode": [opencode], "aider": [aider],
    "daari-code": [daari_code], "cross": [cross]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", choices=sorted(CLIENTS))
    options = parser.parse_args()
    for binary in (BIN / "claude", BIN / "codex", BIN / "opencode", AIDER):
        if not binary.exists():
            print(f"{binary} is missing: npm install --prefix .clients @anthropic-ai/claude-code @openai/codex "
                  "opencode-ai; python3 -m venv .clients/aider && .clients/aider/bin/pip install aider-chat")
            return 2
    checks = Checks()
    with tempfile.TemporaryDirectory(prefix="daari-clients-") as name:
        tmp = Path(name)
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        fake = [sys.executable, "-m", "tests.clients.agent_upstream", "--port", str(port)]
        with process(fake, tmp / "upstream.log", upstream + "/stats"):
            for client, runs in CLIENTS.items():
                if options.only not in (None, client):
                    continue
                for run in runs:
                    try:
                        run(tmp, upstream, checks)
                    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                        checks.check(False, f"{client}: {exc}")
    print("all client checks passed" if not checks.failures else f"{len(checks.failures)} check(s) failed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
