"""The sandbox policy: which directory a command runs in, which files may run, what environment it sees.

Pure functions (they read the file system, never run anything). A refusal is a `Refused` with a reason
a user can act on; nothing is ever run after one.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from daari.config import ToolsConfig

MAX_PATH_CHARS = 4096
# Environment variables a command never sees: credentials of any kind, and everything that steers git.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|SIGNING", re.I)
_DROPPED_PREFIXES = ("GIT_", "SSH_", "AWS_", "AZURE_", "GOOGLE_", "GCP_", "OPENAI_", "ANTHROPIC_", "DAARI_",
                     "GH_", "GITHUB_", "GITLAB_", "HF_", "HUGGING", "NPM_CONFIG_", "DOCKER_", "KUBE",
                     "LD_", "DYLD_", "PYTHONSTARTUP", "PYTHONINSPECT", "NODE_OPTIONS", "BASH_ENV", "ENV",
                     "PROMPT_COMMAND", "PERL5OPT", "RUBYOPT", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS")
_KEPT_ALWAYS = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "USER", "LOGNAME", "SHELL", "TZ")

# Git with everything that could run a command from a repository's own config switched off.
GIT_HARDENING = (
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.pager=cat",
    "-c", "core.editor=false",
    "-c", "core.sshCommand=false",
    "-c", "core.gitProxy=",
    "-c", "core.askPass=false",
    "-c", "credential.helper=",
    "-c", "diff.external=",
    "-c", "protocol.allow=never",
    "-c", "uploadpack.packObjectsHook=",
    "-c", "gpg.program=false",
    "-c", "core.untrackedCache=false",
    "--no-pager",
    "--no-optional-locks",
)
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_NO_LAZY_FETCH": "1",
           "GIT_OPTIONAL_LOCKS": "0", "GIT_ASKPASS": "false", "SSH_ASKPASS": "false", "GIT_EDITOR": "false",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_ATTR_NOSYSTEM": "1"}
# Config keys (in the repository's own .git/config) that name a command git may run: each one found is
# overridden on the command line, and a repository that includes config from elsewhere is refused.
_COMMAND_KEY = re.compile(r"^(?:filter\.[^\n]+\.(?:clean|smudge|process)|diff\.[^\n]+\.(?:textconv|command)|"
                          r"merge\.[^\n]+\.driver|pager\.[^\n]+|alias\.[^\n]+)$", re.I)
_REFUSED_KEY = re.compile(r"^(?:include\.path|includeif\..+\.path|core\.worktree|extensions\.worktreeconfig)$", re.I)


class Refused(Exception):
    """A command is not run: the reason is shown to the user."""


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(path))


def _under(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _in_git_dir(path: Path, repo_root: Path) -> bool:
    """Inside .git (hooks, objects): not a file of the working tree, whatever allow_scripts says."""
    return path.is_relative_to(repo_root) and ".git" in path.relative_to(repo_root).parts


def resolve_repo(header: str | None, config: ToolsConfig) -> Path:
    """The repository root a command runs in: X-Daari-Repo (under an allowed root), else tools.repo_root."""
    if header is not None and header.strip():
        value = header.strip()
        if len(value) > MAX_PATH_CHARS or "\0" in value or not os.path.isabs(value):
            raise Refused("X-Daari-Repo must be an absolute directory path")
        real = _real(value)
        roots = [_real(r) for r in config.allowed_roots]
        if not any(_under(real, root) for root in roots):
            raise Refused("X-Daari-Repo is not under tools.allowed_roots")
        if not real.is_dir():
            raise Refused("X-Daari-Repo is not a directory")
        return real
    if not config.repo_root:
        raise Refused("no repository: set tools.repo_root or send X-Daari-Repo")
    real = _real(config.repo_root)
    if not real.is_dir():
        raise Refused("tools.repo_root is not a directory")
    return real


def script_path(repo_root: Path, requested: str, allow_scripts: tuple[str, ...]) -> Path:
    """DEV-05: the script must be listed in allow_scripts and resolve (symlinks followed) to a file in the repo."""
    allowed = {_real(repo_root / s) for s in allow_scripts if not os.path.isabs(s)}
    real = _real(repo_root / requested)
    if os.path.isabs(requested) or not _under(real, repo_root):
        raise Refused(f"{requested} is outside the repository")
    if _in_git_dir(real, repo_root):
        raise Refused(f"{requested} is inside .git, not in the working tree")
    if real not in allowed:
        raise Refused(f"{requested} is not listed in allow_scripts of .daari/commands.yaml")
    if not real.is_file():
        raise Refused(f"{requested} is not a file")
    return real


def executable(name: str, repo_root: Path, env: Mapping[str, str], *, from_repo: bool = False) -> Path | None:
    """argv[0] of a command: on PATH, or a path inside the repo (./gradlew). An absolute path elsewhere is
    accepted only from daari's own config, never from the repository's commands.yaml (`from_repo`)."""
    if "/" in name:
        real = _real(name if os.path.isabs(name) else repo_root / name)
        if (from_repo or not os.path.isabs(name)) and (not _under(real, repo_root) or _in_git_dir(real, repo_root)):
            return None
        return real if real.is_file() else None
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    return _real(found) if found else None


def scrubbed_env(base: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment without credentials or git/loader steering; no colours, no prompts."""
    env = {}
    for name, value in base.items():
        if name in _KEPT_ALWAYS:
            env[name] = value
        elif _SECRET_NAME.search(name) or name.upper().startswith(_DROPPED_PREFIXES):
            continue
        else:
            env[name] = value
    env.update(GIT_ENV)
    env.update({"NO_COLOR": "1", "TERM": "dumb", "CI": "1", "FORCE_COLOR": "0"})
    return env


def git_overrides(local_config: str) -> list[str]:
    """-c overrides for the command-running keys a repository's own config sets (`git config -l --local -z`).

    Raises Refused when the config pulls in files from elsewhere (include.path, core.worktree).
    """
    args: list[str] = []
    for entry in local_config.split("\0"):
        key = entry.split("\n", 1)[0].strip()
        if not key:
            continue
        if _REFUSED_KEY.match(key):
            raise Refused(f"the repository's git config sets {key}; daari does not run git there")
        if _COMMAND_KEY.match(key):
            args += ["-c", f"{key}="]
    return args


def check_git_dir(repo_root: Path) -> None:
    """The repository's .git must be a real directory inside it (a .git file can point anywhere)."""
    dot_git = repo_root / ".git"
    if dot_git.is_symlink() or not dot_git.is_dir():
        raise Refused("not a git repository with its own .git directory")
