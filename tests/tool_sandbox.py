"""Test helpers for the tool tiers: real git repositories in tmp dirs, trap executables, a running runner.

A `Sandbox` has an allowed root holding the repository, a directory outside it with a secret, a canary
file that any escaped execution appends to (every name in TRAPS on PATH is a trap that writes it), and
a PATH where only git is real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from actors.faults import FAULTS
from actors.runtime import Health, Mailbox, supervise
from actors.tool_runner import ToolRunnerActor
from daari.config import ToolsConfig, config_from_dict
from daari.pipeline.shortcuts import ShortcutQuery
from daari.pipeline.steps.ccs import CcsTier
from daari.pipeline.steps.lt import ToolTier
from daari.pipeline.steps.tool_service import ToolService
from daari.protocol.chat import ChatRequest, Message

TRAPS = ("rm", "curl", "wget", "touch", "bash", "nc", "ssh", "perl", "ruby", "node", "npm", "npx", "make", "cat",
         "ls", "id", "whoami", "env", "printenv", "less", "more", "vi", "vim", "nano", "tee", "cp", "mv", "chmod",
         "dd", "scp", "rsync", "python", "python3", "pip", "eslint", "prettier", "idea", "gradle", "mvn", "zsh",
         "dash", "busybox", "xargs", "find", "socat", "openssl", "base64", "sed", "awk", "head", "tail")
SECRET_MARKER = "SECRET-OUTSIDE-THE-REPO-7f3a"
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def read(path: str | Path) -> str:
    """A file's text (sync, so async tests do not touch pathlib themselves)."""
    return Path(path).read_text()


def mode(path: str | Path) -> int:
    return Path(path).stat().st_mode & 0o777


def git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo), **GIT_ENV}
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env)
    return done.stdout


def make_repo(path: Path, files: dict[str, str] | None = None, executable: tuple[str, ...] = ()) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    (path / "README.md").write_text("hello\n")
    for name, text in (files or {}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        if name in executable:
            target.chmod(0o755)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return path


@dataclass
class Sandbox:
    base: Path
    root: Path = field(init=False)  # tools.allowed_roots
    repo: Path = field(init=False)
    outside: Path = field(init=False)  # not under any allowed root
    canary: Path = field(init=False)
    data: Path = field(init=False)
    bin: Path = field(init=False)

    def __post_init__(self) -> None:
        self.root = self.base / "allowed"
        self.outside = self.base / "outside"
        self.canary = self.base / "canary.log"
        self.data = self.base / "data"
        self.bin = self.base / "bin"
        self.outside.mkdir(parents=True)
        (self.outside / "secret.txt").write_text(SECRET_MARKER + "\n")
        evil = self.outside / "evil.sh"
        evil.write_text(f"#!/bin/sh\necho \"evil $0 $*\" >> {self.canary}\necho {SECRET_MARKER}\n")
        evil.chmod(0o755)
        self.bin.mkdir()
        for name in TRAPS:
            trap = self.bin / name
            trap.write_text(f"#!/bin/sh\necho \"trap {name} $*\" >> {self.canary}\n")
            trap.chmod(0o755)
        real_git = shutil.which("git")
        assert real_git is not None
        (self.bin / "git").symlink_to(real_git)
        self.repo = make_repo(self.root / "repo", {
            ".daari/commands.yaml": ('commands:\n  test: "./tools/test.sh"\n  lint: "./tools/lint.sh --quiet"\n'
                                     '  build: {command: "./tools/build.sh", timeout_s: 30}\n'
                                     'allow_scripts:\n  - "./scripts/ok.sh"\n  - "./scripts/link-out.sh"\n'),
            "tools/test.sh": "#!/bin/sh\necho \"tests: 3 passed ($*)\"\n",
            "tools/lint.sh": "#!/bin/sh\necho \"lint clean $*\"\n",
            "tools/build.sh": "#!/bin/sh\necho built\n",
            "scripts/ok.sh": "#!/bin/sh\necho script ran\n",
            "scripts/unlisted.sh": "#!/bin/sh\necho unlisted ran\n",
            "src/app.js": "console.log('hi')\n",
        }, executable=("tools/test.sh", "tools/lint.sh", "tools/build.sh", "scripts/ok.sh", "scripts/unlisted.sh"))
        (self.repo / "scripts" / "link-out.sh").symlink_to(evil)

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": str(self.bin), "HOME": str(self.base), "LANG": "C.UTF-8",
                "OPENAI_API_KEY": "sk-test-never-leaks", "MY_SERVICE_TOKEN": "tok-never-leaks"}

    def escaped(self) -> str:
        """What escaped executions wrote (empty when none did)."""
        return self.canary.read_text() if self.canary.exists() else ""

    def logged_commands(self) -> list[str]:
        """The first line ("$ command") of every command log: everything the runner executed."""
        logs = self.data / "tools" / "logs"
        return sorted(p.read_text().splitlines()[0] for p in logs.glob("*.log")) if logs.exists() else []

    def config(self, **tools: Any) -> ToolsConfig:
        data = {"enabled": True, "allowed_roots": [str(self.root)], "repo_root": str(self.repo), **tools}
        return config_from_dict({"tools": data}).tools


def chat(text: str, headers: dict[str, str] | None = None, agent_turn: bool = False) -> ShortcutQuery:
    request = ChatRequest(messages=[Message("user", text)], model="m")
    return ShortcutQuery(request, {k.lower(): v for k, v in (headers or {}).items()}, "", agent_turn=agent_turn)


@dataclass
class Tools:
    service: ToolService
    ccs: CcsTier
    lt: ToolTier


@asynccontextmanager
async def running_tools(sandbox: Sandbox, config: ToolsConfig) -> AsyncIterator[Tools]:
    mailbox = Mailbox("tool_runner", 64, FAULTS)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervise, lambda: ToolRunnerActor(sandbox.data, config, sandbox.env), mailbox,
                            Health().status("tool_runner"))
        service = ToolService(config, mailbox.address, sandbox.env)
        yield Tools(service, CcsTier(service), ToolTier(service))
        nursery.cancel_scope.cancel()
