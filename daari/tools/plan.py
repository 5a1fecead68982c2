"""From a matched pattern to the exact command that runs: argv, cwd, environment, timeout, TTL. Pure.

Commands are fixed argument lists chosen here; text from the message never becomes an argument (the one
exception, a DEV-05 script path, must be an allowlisted file inside the repository). LT-05/LT-06 pass the
names they act on to the configured IntelliJ command in the environment, after checking each is a plain
identifier or relative path.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from daari.config import ToolCommandConfig, ToolsConfig
from daari.tools.commands import CommandsFileError, ProjectCommands, load_project_commands, split_command
from daari.tools.patterns import CommandMatch
from daari.tools.policy import GIT_HARDENING, Refused, check_git_dir, executable, script_path

_RERUN_KINDS = {"test": "test", "tests": "test", "lint": "lint", "linter": "lint", "linting": "lint",
                "build": "build"}


class Unavailable(Exception):
    """The tool the message asks for is not installed or configured: the model tiers answer instead."""

    def __init__(self, tool: str, reason: str) -> None:
        super().__init__(reason)
        self.tool = tool
        self.reason = reason


@dataclass(frozen=True)
class CommandPlan:
    rule_id: str
    intent: str
    kind: str  # git | test | lint | build | script | tool: picks the CCS TTL
    argv: tuple[str, ...]
    display: str  # the command as the user would type it (no hardening flags); also keys the CCS
    cwd: Path
    timeout_s: float
    ttl_s: float
    destructive: bool = False
    git: bool = False  # the runner adds -c overrides for the repository's own command-running config keys
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def ccs_key(self) -> str:
        return ccs_key(self.cwd, self.cwd, self.display)


def ccs_key(repo_root: Path, cwd: Path, display: str) -> str:
    """SHA-256 over repo root, cwd and the normalized command (NUL-separated, so no two triples collide)."""
    normalized = " ".join(display.split())
    return hashlib.sha256(f"{repo_root}\0{cwd}\0{normalized}".encode()).hexdigest()


def effective_intent(match: CommandMatch) -> str:
    """DEV-07 reruns the intent it names; DEV-06 reads the one it names."""
    if match.intent in ("rerun", "ccs_read"):
        return _RERUN_KINDS.get(match.slots.get("kind", "test").lower(), "test")
    return match.intent


def plan_command(match: CommandMatch, repo_root: Path, config: ToolsConfig, env: Mapping[str, str]) -> CommandPlan:
    """Raises Refused (policy) or Unavailable (tool missing); never returns a plan that should not run."""
    intent = effective_intent(match)
    ttl = config.ccs
    if intent in ("git_status", "git_diff"):
        check_git_dir(repo_root)
        git = executable(config.git, repo_root, env)
        if git is None:
            raise Unavailable("git", f"git ({config.git}) is not installed")
        if intent == "git_status":
            args: tuple[str, ...] = ("status", "--ignore-submodules=all")
            display = "git status"
        else:
            staged = ("--staged",) if match.slots.get("staged") else ()
            args = ("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--ignore-submodules=all", *staged)
            display = "git diff" + (" --staged" if staged else "")
        return CommandPlan(match.rule_id, intent, "git", (str(git), *GIT_HARDENING, *args), display, repo_root,
                           config.timeout_s, ttl.git_ttl_s if ttl.enabled else 0.0, git=True)
    if intent == "script":
        project = _project(repo_root)
        path = script_path(repo_root, match.slots.get("script", ""), project.allow_scripts)
        argv = _script_argv(path, env)
        return CommandPlan(match.rule_id, intent, "script", argv, "./" + str(path.relative_to(repo_root)),
                           repo_root, config.timeout_s, ttl.script_ttl_s if ttl.enabled else 0.0)
    if intent in ("test", "lint", "build"):
        return _project_plan(match, intent, repo_root, config, env)
    if intent == "eslint":
        return _tool_plan(match, "eslint", config.eslint, ("eslint", "."), repo_root, config, env, kind="lint")
    if intent == "prettier":
        return _tool_plan(match, "prettier", config.prettier, ("prettier", "--write", "."), repo_root, config, env)
    if intent in ("rename", "optimize_imports"):
        return _intellij_plan(match, intent, repo_root, config, env)
    raise Unavailable(intent, f"no command for {intent}")


def _project(repo_root: Path) -> ProjectCommands:
    try:
        return load_project_commands(repo_root)
    except CommandsFileError as exc:
        raise Refused(str(exc)) from None


def _project_plan(match: CommandMatch, intent: str, repo_root: Path, config: ToolsConfig,
                  env: Mapping[str, str]) -> CommandPlan:
    command = _project(repo_root).commands.get(intent)
    if command is None:
        if intent == "lint":  # no project lint command: eslint when it is there
            return _tool_plan(match, "eslint", config.eslint, ("eslint", "."), repo_root, config, env, kind="lint")
        raise Unavailable(intent, f"no '{intent}' command in .daari/commands.yaml")
    exe = executable(command.argv[0], repo_root, env, from_repo=True)
    if exe is None:
        raise Unavailable(intent, f"'{command.argv[0]}' ({intent} command) is neither on PATH nor a file in the repo")
    ttl = {"test": config.ccs.test_ttl_s, "lint": config.ccs.lint_ttl_s, "build": config.ccs.build_ttl_s}[intent]
    return CommandPlan(match.rule_id, intent, intent, (str(exe), *command.argv[1:]), shlex.join(command.argv),
                       repo_root, command.timeout_s or config.timeout_s, ttl if config.ccs.enabled else 0.0,
                       destructive=command.destructive)


def _tool_plan(match: CommandMatch, tool: str, configured: ToolCommandConfig, default: tuple[str, ...],
               repo_root: Path, config: ToolsConfig, env: Mapping[str, str], kind: str = "tool") -> CommandPlan:
    try:
        argv = split_command(configured.command, f"tools.{tool}.command") if configured.command else default
    except CommandsFileError as exc:
        raise Refused(str(exc)) from None
    exe = _local_bin(repo_root, argv[0]) if not configured.command else None
    exe = exe or executable(argv[0], repo_root, env)
    if exe is None:
        raise Unavailable(tool, f"{tool} is not installed (set tools.{tool}.command)")
    ttl = config.ccs.lint_ttl_s if kind == "lint" and config.ccs.enabled else 0.0
    return CommandPlan(match.rule_id, match.intent, kind, (str(exe), *argv[1:]), shlex.join(argv), repo_root,
                       configured.timeout_s or config.timeout_s, ttl)


def _intellij_plan(match: CommandMatch, intent: str, repo_root: Path, config: ToolsConfig,
                   env: Mapping[str, str]) -> CommandPlan:
    configured = config.intellij
    if not configured.command:
        raise Unavailable("intellij", "no IntelliJ command is configured (tools.intellij.command)")
    try:
        argv = split_command(configured.command, "tools.intellij.command")
    except CommandsFileError as exc:
        raise Refused(str(exc)) from None
    exe = executable(argv[0], repo_root, env)
    if exe is None:
        raise Unavailable("intellij", f"'{argv[0]}' (tools.intellij.command) is not installed")
    extra = {"DAARI_TOOL_ACTION": intent}
    for slot, name in (("kind", "DAARI_RENAME_KIND"), ("old", "DAARI_RENAME_FROM"), ("new", "DAARI_RENAME_TO"),
                       ("scope", "DAARI_TARGET"), ("target", "DAARI_TARGET")):
        value = match.slots.get(slot)
        if value is not None:
            if ".." in value.split("/") or value.startswith("/"):
                raise Refused(f"{value} is outside the repository")
            extra[name] = value
    display = shlex.join(argv) + "  # " + " ".join(f"{k}={v}" for k, v in sorted(extra.items()))
    return CommandPlan(match.rule_id, intent, "tool", (str(exe), *argv[1:]), display, repo_root,
                       configured.timeout_s or config.timeout_s, 0.0, destructive=intent == "rename",
                       extra_env=extra)


def _local_bin(repo_root: Path, name: str) -> Path | None:
    """A tool the project installed itself (node_modules/.bin), preferred over one on PATH."""
    candidate = Path(os.path.realpath(repo_root / "node_modules" / ".bin" / name))
    return candidate if candidate.is_relative_to(repo_root) and candidate.is_file() else None


def _script_argv(path: Path, env: Mapping[str, str]) -> tuple[str, ...]:
    if os.access(path, os.X_OK):
        return (str(path),)
    if path.suffix == ".py":
        return (sys.executable, str(path))
    sh = executable("sh", path.parent, env)
    if sh is None:
        raise Unavailable("sh", "no sh on PATH to run the script with")
    return (str(sh), str(path))
