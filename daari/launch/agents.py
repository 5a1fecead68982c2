"""The agents `daari code` runs, and how each is pointed at daari: environment variables, arguments, or a
generated config. Each `prepare` takes the agent's binary, its own arguments and the user's environment, and
returns what to run; nothing here starts a process."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from daari.launch import codex_home
from daari.launch.target import TOKEN_HEADER, Target

# Claude Code 2.1: the largest window it knows (its default model, Opus "[1m]", has it, through daari too), and
# the range its auto-compact window accepts (CLAUDE_CODE_AUTO_COMPACT_WINDOW).
CLAUDE_MAX_WINDOW = 1_000_000
CLAUDE_MIN_COMPACT_WINDOW = 100_000
OPENCODE_MODEL = "daari"  # the model id opencode shows and sends; daari passes it to tiers without a model
PLACEHOLDER_KEY = "daari"  # for clients that refuse to start without a key; daari forwards none unless asked


class LaunchError(Exception):
    """The agent cannot be pointed at daari as set up (one line for the user)."""


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]


Prepare = Callable[[Target, str, list[str], Mapping[str, str]], Launch]


@dataclass(frozen=True)
class Agent:
    name: str
    binary: str
    install: str  # one line: how to install it
    prepare: Prepare


def _with_header(headers: str | None, name: str, value: str) -> str:
    """ANTHROPIC_CUSTOM_HEADERS (`Name: value` lines) with `name` set to `value`."""
    lines = [line for line in (headers or "").splitlines()
             if line.strip() and line.split(":", 1)[0].strip().lower() != name]
    return "\n".join([*lines, f"{name}: {value}"])


def claude(target: Target, binary: str, args: list[str], environ: Mapping[str, str]) -> Launch:
    env = dict(environ)
    env["ANTHROPIC_BASE_URL"] = target.url
    if target.token:
        env["ANTHROPIC_CUSTOM_HEADERS"] = _with_header(env.get("ANTHROPIC_CUSTOM_HEADERS"), TOKEN_HEADER,
                                                       target.token)
    window = target.context_window
    if window:
        # Claude Code uses it for model names that do not start with "claude-" (a tier's own model chosen
        # with --model or ANTHROPIC_MODEL); otherwise 200k.
        env.setdefault("CLAUDE_CODE_MAX_CONTEXT_TOKENS", str(window))
        if window < CLAUDE_MAX_WINDOW:
            # Whatever window Claude Code assumes for its model (1M for its default one), it compacts before
            # the tier's (capped to that assumption; never below what Claude Code accepts).
            env.setdefault("CLAUDE_CODE_AUTO_COMPACT_WINDOW", str(max(window, CLAUDE_MIN_COMPACT_WINDOW)))
    return Launch([binary, *args], env)


def codex(target: Target, binary: str, args: list[str], environ: Mapping[str, str]) -> Launch:
    env = dict(environ)
    try:
        env["CODEX_HOME"] = str(codex_home.prepare_overlay(target, environ))
    except codex_home.CodexConfigError as exc:
        raise LaunchError(str(exc)) from None
    return Launch([binary, *args], env)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        out[key] = _merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def opencode_config(target: Target, environ: Mapping[str, str]) -> dict[str, Any]:
    """An OpenAI-compatible provider `daari` and its model, selected for the main and the small model (the
    small one writes session titles: without it they would go to another provider)."""
    options: dict[str, Any] = {"baseURL": f"{target.url}/v1",
                               "apiKey": environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY}
    if target.token:
        options["headers"] = {TOKEN_HEADER: target.token}
    model: dict[str, Any] = {"name": "daari", "tool_call": True}
    if target.context_window:
        model["limit"] = {"context": target.context_window, "output": min(32_000, target.context_window // 4)}
    chosen = f"daari/{OPENCODE_MODEL}"
    return {"provider": {"daari": {"npm": "@ai-sdk/openai-compatible", "name": "daari", "options": options,
                                   "models": {OPENCODE_MODEL: model}}},
            "model": chosen, "small_model": chosen}


def opencode(target: Target, binary: str, args: list[str], environ: Mapping[str, str]) -> Launch:
    env = dict(environ)
    existing = env.get("OPENCODE_CONFIG_CONTENT")
    try:
        base = json.loads(existing) if existing else {}
    except ValueError:
        raise LaunchError("OPENCODE_CONFIG_CONTENT is not valid JSON") from None
    if not isinstance(base, dict):
        raise LaunchError("OPENCODE_CONFIG_CONTENT is not a JSON object")
    # Inline config: opencode merges it over the user's own files, so theirs stays untouched.
    env["OPENCODE_CONFIG_CONTENT"] = json.dumps(_merge(base, opencode_config(target, environ)))
    return Launch([binary, *args], env)


def aider(target: Target, binary: str, args: list[str], environ: Mapping[str, str]) -> Launch:
    env = dict(environ)
    base = f"{target.url}/v1"
    env["OPENAI_API_BASE"] = base
    if target.token:
        env["OPENAI_API_KEY"] = target.token  # daari takes its token as Authorization: Bearer too
    elif not env.get("OPENAI_API_KEY"):
        env["OPENAI_API_KEY"] = PLACEHOLDER_KEY
    return Launch([binary, "--openai-api-base", base, *args], env)


AGENTS: dict[str, Agent] = {a.name: a for a in (
    Agent("claude", "claude", "npm install -g @anthropic-ai/claude-code", claude),
    Agent("codex", "codex", "npm install -g @openai/codex", codex),
    Agent("opencode", "opencode", "npm install -g opencode-ai", opencode),
    Agent("aider", "aider", "python -m pip install aider-install && aider-install", aider),
)}
