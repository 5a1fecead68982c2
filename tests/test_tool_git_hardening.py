"""A hostile repository's .git/config cannot make daari's git run anything: every key that names a command
is shown to fire under a plain `git`, and not under daari's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.tool_sandbox import Sandbox, chat, git, read, running_tools

HOSTILE_KEYS = ["core.fsmonitor", "core.pager", "pager.diff", "pager.status", "diff.external", "diff.evil.textconv",
                "diff.evil.command", "filter.evil.clean", "filter.evil.smudge", "filter.evil.process",
                "core.hooksPath", "core.sshCommand", "core.editor", "alias.status", "gpg.program"]


def arm(sandbox: Sandbox, key: str) -> None:
    """Point `key` at a command that writes the canary, and give git a reason to use it."""
    repo = sandbox.repo
    (repo / ".gitattributes").write_text("*.md filter=evil diff=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    value = f"echo {key} >> {sandbox.canary}; cat"
    if key == "core.hooksPath":
        hooks = repo / "evil-hooks"
        hooks.mkdir()
        for hook in ("post-index-change", "pre-commit", "post-checkout"):
            (hooks / hook).write_text(f"#!/bin/sh\necho {key} >> {sandbox.canary}\n")
            (hooks / hook).chmod(0o755)
        value = str(hooks)
    git(repo, "config", key, value)
    (repo / "README.md").write_text("hello\nchanged\n")


def logs_of(sandbox: Sandbox, intent: str) -> list[Path]:
    return list((sandbox.data / "tools" / "logs").glob(f"*{intent}*.log"))


def plain_git_fires(sandbox: Sandbox, key: str) -> bool:
    """The same repository under an unhardened git with a terminal-like pager setting: does the key fire?"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(sandbox.base), "GIT_PAGER": "", "PAGER": ""}
    for args in (["status"], ["diff"], ["-p", "diff"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=sandbox.repo, env=env, capture_output=True, check=False)
    return key in sandbox.escaped()


@pytest.mark.parametrize("key", HOSTILE_KEYS)
async def test_hostile_git_config_runs_nothing(tmp_path: Path, key: str) -> None:
    sandbox = Sandbox(tmp_path)
    arm(sandbox, key)
    async with running_tools(sandbox, sandbox.config()) as tools:
        for message in ("git status", "git diff", "git diff --staged", "show me the git status"):
            result = await tools.lt.answer(chat(message, {"X-Daari-ReRun-Command": "true"}))
            assert result is not None and result.completion is not None, (message, result)
            assert result.details["tool"]["exit_code"] == 0, result.completion.text
    assert sandbox.escaped() == ""
    assert any("+changed" in read(p) for p in logs_of(sandbox, "git_diff"))


@pytest.mark.parametrize("key", ["core.fsmonitor", "diff.external", "diff.evil.textconv", "filter.evil.clean",
                                 "filter.evil.process", "core.hooksPath"])
def test_the_hostile_keys_do_fire_under_plain_git(tmp_path: Path, key: str) -> None:
    """The other side: the repository really is hostile (so the test above can fail)."""
    sandbox = Sandbox(tmp_path)
    arm(sandbox, key)
    assert plain_git_fires(sandbox, key)


@pytest.mark.parametrize("setup", ["include", "includeif", "worktree", "dotgit-file", "dotgit-symlink"])
async def test_repositories_that_reach_outside_are_refused(tmp_path: Path, setup: str) -> None:
    sandbox = Sandbox(tmp_path)
    repo = sandbox.repo
    if setup == "include":
        git(repo, "config", "include.path", str(sandbox.outside / "secret.txt"))
    elif setup == "includeif":
        git(repo, "config", f"includeIf.gitdir:{repo}/.path", str(sandbox.outside / "secret.txt"))
    elif setup == "worktree":
        git(repo, "config", "core.worktree", str(sandbox.outside))
    else:
        real = sandbox.outside / "real.git"
        (repo / ".git").rename(real)
        if setup == "dotgit-file":
            (repo / ".git").write_text(f"gitdir: {real}\n")
        else:
            (repo / ".git").symlink_to(real)
    async with running_tools(sandbox, sandbox.config()) as tools:
        result = await tools.lt.answer(chat("git status"))
    assert result is not None and result.completion is None and "tool_refused" in result.details
    assert sandbox.escaped() == "" and all("git status" not in c for c in sandbox.logged_commands())
