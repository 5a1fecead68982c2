"""Where `daari code` points an agent: the daari it serves through, and what the agent must send it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from daari.config import Config

TOKEN_HEADER = "x-daari-token"


@dataclass(frozen=True)
class Target:
    url: str  # http://127.0.0.1:8787, no trailing slash
    token: str | None  # daari's own token when it has one (server.token_env), sent by the agent
    token_env: str  # the environment variable that holds it (agents that read headers from env get the name)
    context_window: int | None  # what the tier serving agent turns holds, when configured
    data_dir: Path  # daari's data dir: the agent's generated config lives there


def connect_host(host: str) -> str:
    """The address to reach a daari bound to `host` (a wildcard bind is reached on loopback)."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def agent_tier_window(config: Config) -> int | None:
    """The context window of the tier that serves agent turns: the highest configured tier that can call
    tools (agent turns at their usual size are planned on the top tier; the embedded model cannot call tools).
    None when that tier does not say (`context_window`)."""
    capable = [t for t in config.configured_tiers() if config.tiers[t].executor != "embedded"]
    return config.tiers[capable[-1]].context_window if capable else None
