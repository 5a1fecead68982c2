"""A repository's `.daari/commands.yaml`: intent -> argument list (split with shlex, never run by a shell).

```yaml
commands:
  test: "npm test"
  lint: "npm run lint"
  build: {command: "./gradlew build", timeout_s: 900}
  deploy: {command: "./deploy.sh", destructive: true}
allow_scripts:
  - "./scripts/ci-check.sh"
```
The file must be a regular file inside the repository (a symlink out of it is refused, never read).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daari.rules.safe_yaml import UnsafeYaml, load_yaml

COMMANDS_FILE = ".daari/commands.yaml"
MAX_FILE_BYTES = 64 * 1024
# Tokens that only mean something to a shell: a command containing one was written for a shell, and
# running it without one would do something else than its author meant.
SHELL_TOKENS = re.compile(r"^(?:&&|\|\||;|\||&|>|>>|<|<<|2>&1|2>|\(|\))$|[`]|\$\(|\$\{|^\$[A-Za-z_]")
_OPERATOR_CHARS = set("();<>|&")
_INTENT = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class CommandsFileError(ValueError):
    """The commands file is there but unusable; nothing from it runs."""


@dataclass(frozen=True)
class ProjectCommand:
    intent: str
    argv: tuple[str, ...]
    destructive: bool = False
    timeout_s: float | None = None


@dataclass(frozen=True)
class ProjectCommands:
    commands: dict[str, ProjectCommand] = field(default_factory=dict)
    allow_scripts: tuple[str, ...] = ()


def split_command(text: str, where: str) -> tuple[str, ...]:
    """shlex-split a configured command; refuse shell syntax instead of passing it on as arguments."""
    if any(c in text for c in "\n\r\0"):
        raise CommandsFileError(f"{where}: a command is one line (a line break is shell syntax)")
    try:
        argv = tuple(shlex.split(text, comments=False, posix=True))
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        operators = [t for t in lexer if t and set(t) <= _OPERATOR_CHARS]
    except ValueError as exc:
        raise CommandsFileError(f"{where}: cannot split {text!r}: {exc}") from None
    if not argv:
        raise CommandsFileError(f"{where}: empty command")
    if operators:
        raise CommandsFileError(f"{where}: {operators[0]!r} is shell syntax; commands run without a shell "
                                "(put pipelines and && chains in a script and list that script)")
    for arg in argv:
        if SHELL_TOKENS.search(arg) or "\n" in arg or "\0" in arg:
            raise CommandsFileError(f"{where}: {arg!r} is shell syntax; commands run without a shell "
                                    "(put pipelines and && chains in a script and list that script)")
    return argv


def parse_commands(data: Any) -> ProjectCommands:
    if data is None:
        return ProjectCommands()
    if not isinstance(data, dict):
        raise CommandsFileError("commands.yaml: expected a mapping with 'commands' and 'allow_scripts'")
    unknown = set(data) - {"commands", "allow_scripts"}
    if unknown:
        raise CommandsFileError(f"commands.yaml: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    commands: dict[str, ProjectCommand] = {}
    raw = data.get("commands") or {}
    if not isinstance(raw, dict):
        raise CommandsFileError("commands.yaml: 'commands' must be a mapping of intent -> command")
    for intent, spec in raw.items():
        if not isinstance(intent, str) or not _INTENT.match(intent):
            raise CommandsFileError(f"commands.yaml: {intent!r} is not an intent name (test, lint, build...)")
        commands[intent] = _command(intent, spec)
    scripts = data.get("allow_scripts") or []
    if not isinstance(scripts, list) or not all(isinstance(s, str) and s for s in scripts):
        raise CommandsFileError("commands.yaml: 'allow_scripts' must be a list of paths")
    return ProjectCommands(commands, tuple(scripts))


def _command(intent: str, spec: Any) -> ProjectCommand:
    where = f"commands.{intent}"
    if isinstance(spec, str):
        return ProjectCommand(intent, split_command(spec, where))
    if not isinstance(spec, dict) or not isinstance(spec.get("command"), str):
        raise CommandsFileError(f"{where}: a command string, or a mapping with 'command'")
    unknown = set(spec) - {"command", "destructive", "timeout_s"}
    if unknown:
        raise CommandsFileError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    destructive = spec.get("destructive", False)
    timeout = spec.get("timeout_s")
    if not isinstance(destructive, bool):
        raise CommandsFileError(f"{where}.destructive: true or false")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
        raise CommandsFileError(f"{where}.timeout_s: a positive number of seconds")
    return ProjectCommand(intent, split_command(spec["command"], where), destructive,
                          float(timeout) if timeout is not None else None)


def load_project_commands(repo_root: Path) -> ProjectCommands:
    """Read the repository's commands file; no file is no commands. Raises CommandsFileError when unusable."""
    path = repo_root / COMMANDS_FILE
    if not path.exists() and not path.is_symlink():
        return ProjectCommands()
    real = path.resolve()
    if not real.is_relative_to(repo_root) or not real.is_file():
        raise CommandsFileError(f"{COMMANDS_FILE} must be a regular file inside the repository")
    if real.stat().st_size > MAX_FILE_BYTES:
        raise CommandsFileError(f"{COMMANDS_FILE} is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = real.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandsFileError(f"cannot read {COMMANDS_FILE}: {exc}") from None
    try:
        return parse_commands(load_yaml(text))
    except UnsafeYaml as exc:
        raise CommandsFileError(f"{COMMANDS_FILE}: {exc}") from None
