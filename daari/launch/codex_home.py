"""`daari code codex`: a CODEX_HOME overlay in daari's data dir. Its config.toml is the user's own with a
`daari` model provider added and selected; every other entry (auth.json, sessions, AGENTS.md, skills...) is a
link to the user's own, so logins, history and instructions stay where Codex keeps them."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from daari.datadir import PRIVATE_FILE, private_dir
from daari.launch.target import TOKEN_HEADER, Target

PROVIDER_ID = "daari"
CONFIG = "config.toml"
OVERLAY_DIR = "codex-home"


class CodexConfigError(Exception):
    """The user's config.toml cannot be read (Codex itself would refuse it too)."""


def user_codex_home(environ: Mapping[str, str]) -> Path:
    """Where Codex keeps its files: $CODEX_HOME, else ~/.codex (as codex-rs find_codex_home)."""
    configured = environ.get("CODEX_HOME", "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path(environ.get("HOME") or os.path.expanduser("~")) / ".codex"


def provider(target: Target, environ: Mapping[str, str]) -> dict[str, Any]:
    """The `[model_providers.daari]` table: Responses over HTTP (daari serves no websocket); the name is not
    "OpenAI", so Codex compacts locally instead of calling /responses/compact."""
    table: dict[str, Any] = {"name": "daari", "base_url": f"{target.url}/v1", "wire_api": "responses",
                             "supports_websockets": False}
    if environ.get("OPENAI_API_KEY"):
        # Sent as Authorization: Bearer; used upstream only by a tier with forward_client_key.
        table["env_key"] = "OPENAI_API_KEY"
    if target.token:
        # Codex reads the header's value from the environment: the token never lands in the file.
        table["env_http_headers"] = {TOKEN_HEADER: target.token_env}
    return table


def overlay_config(user_config: dict[str, Any], daari_provider: dict[str, Any]) -> dict[str, Any]:
    """The user's config with the daari provider added and selected, also in the profiles that pick a
    provider of their own (a profile's `model_provider` wins over the top-level one)."""
    config = dict(user_config)
    config["model_provider"] = PROVIDER_ID
    providers = dict(config.get("model_providers") or {})
    providers[PROVIDER_ID] = daari_provider
    config["model_providers"] = providers
    profiles = config.get("profiles")
    if isinstance(profiles, dict):
        config["profiles"] = {name: {**p, "model_provider": PROVIDER_ID}
                              if isinstance(p, dict) and "model_provider" in p else p
                              for name, p in profiles.items()}
    return config


def read_user_config(home: Path) -> dict[str, Any]:
    path = home / CONFIG
    try:
        with path.open("rb") as src:
            return tomllib.load(src)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CodexConfigError(f"cannot read {path}: {exc}") from None


def prepare_overlay(target: Target, environ: Mapping[str, str]) -> Path:
    """Write the overlay (config.toml and links to the user's other entries) and return its path."""
    home = user_codex_home(environ)
    overlay = private_dir(target.data_dir / OVERLAY_DIR)
    config = overlay_config(read_user_config(home), provider(target, environ))
    _write_private(overlay / CONFIG, tomli_w.dumps(config).encode())
    _link_entries(home, overlay)
    return overlay


def _write_private(path: Path, data: bytes) -> None:
    """Atomically (two launches at once each read a whole file), 0600."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def _link_entries(home: Path, overlay: Path) -> None:
    """Each entry of the user's Codex home but config.toml, linked into the overlay. An entry Codex made in
    the overlay itself (a sessions dir the user did not have yet) is kept; links whose target is gone are
    removed."""
    for link in overlay.iterdir():
        if link.is_symlink() and not link.exists():
            link.unlink()
    if not home.is_dir():
        return
    for entry in home.iterdir():
        if entry.name == CONFIG:
            continue
        link = overlay / entry.name
        if link.is_symlink():
            if Path(os.readlink(link)) == entry.absolute():
                continue
            link.unlink()
        elif link.exists():
            continue
        try:
            link.symlink_to(entry.absolute())
        except FileExistsError:  # another launch linked it a moment ago
            pass
