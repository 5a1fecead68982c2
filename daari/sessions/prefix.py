"""The prompt prefix a provider caches, kept byte-stable across a session's turns (docs/caching.md, "Provider
prompt caches"): pure rewrites of an Anthropic body, applied the same way on every turn.

- Claude Code's first system block (`x-anthropic-billing-header: ... cch=...;`) changes on every request. Anthropic
  itself reads it and leaves it out of its cache; any other Anthropic-compatible provider caches by bytes, so
  that block alone makes every turn a miss. daari strips it for upstreams that are not Anthropic's.
- `cache_control` stays where the client put it; its `ttl` ("1h") is kept, and removed for an upstream that
  refuses it.
- A top-level `cache_control` (Anthropic's automatic caching) is kept as sent.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx

from daari.jsonio import canonical
from daari.protocol.chat import ChatRequest
from daari.protocol.key_fields import is_billing_block

ONE_HOUR_TTL = "1h"
FIRST_PARTY_SUFFIX = "anthropic.com"


def is_first_party(base_url: str | None) -> bool:
    """Anthropic's own API (which understands Claude Code's billing block)."""
    if not base_url:
        return False
    host = httpx.URL(base_url).host
    return host == FIRST_PARTY_SUFFIX or host.endswith("." + FIRST_PARTY_SUFFIX)


def strip_billing_block(body: dict[str, Any]) -> dict[str, Any]:
    """`body` without Claude Code's per-request billing block (the same object when it has none)."""
    system = body.get("system")
    if not isinstance(system, list):
        return body
    kept = [b for b in system if not (isinstance(b, dict) and b.get("type") == "text"
                                      and isinstance(b.get("text"), str) and is_billing_block(b["text"]))]
    if len(kept) == len(system):
        return body
    return {**body, "system": kept}


def has_cache_ttl(value: Any) -> bool:
    if isinstance(value, dict):
        marker = value.get("cache_control")
        if isinstance(marker, dict) and "ttl" in marker:
            return True
        return any(has_cache_ttl(v) for v in value.values() if isinstance(v, list | dict))
    if isinstance(value, list):
        return any(has_cache_ttl(v) for v in value)
    return False


def strip_cache_ttl(value: Any) -> Any:
    """Every `cache_control` without its `ttl` (containers copied only where something changed)."""
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "cache_control" and isinstance(item, dict) and "ttl" in item:
                new: Any = {k: v for k, v in item.items() if k != "ttl"}
            elif isinstance(item, list | dict):
                new = strip_cache_ttl(item)
            else:
                new = item
            changed = changed or new is not item
            out[key] = new
        return out if changed else value
    if isinstance(value, list):
        items = [strip_cache_ttl(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def cache_ttl_s(body: dict[str, Any]) -> float:
    """How long the provider keeps what this body writes: an hour when any marker asks for it, else 5 minutes."""
    return 3600.0 if _has_marker(body, one_hour=True) else 300.0


def marks_cache(body: dict[str, Any]) -> bool:
    """Whether the client asked Anthropic to cache (a marker anywhere, or the top-level automatic one)."""
    return "cache_control" in body or any(_has_marker(body.get(field), one_hour=False)
                                          for field in ("system", "tools", "messages"))


_ABSENT = object()


def _has_marker(value: Any, *, one_hour: bool) -> bool:
    """Whether any object nested in `value` (itself included) has a `cache_control` (`one_hour`: one whose ttl
    is an hour). Plain loops over a stack with the test inline: every block of a body is visited on every
    request, and the recursion of generators this replaced cost ~3x as much (bench/body_size.py)."""
    stack = [value] if isinstance(value, (list, dict)) else []
    push, pop = stack.append, stack.pop
    containers = (list, dict)  # a tuple: isinstance with `list | dict` is slower in Python 3.11
    while stack:
        item = pop()
        if isinstance(item, dict):
            marker = item.get("cache_control", _ABSENT)
            if marker is not _ABSENT and (not one_hour or (isinstance(marker, dict)
                                                           and marker.get("ttl") == ONE_HOUR_TTL)):
                return True
            for inner in item.values():
                if isinstance(inner, containers):
                    push(inner)
        else:
            for inner in item:
                if isinstance(inner, containers):
                    push(inner)
    return False


def prefix_fingerprint(request: ChatRequest) -> str:
    """A hash of what every turn of a session repeats to hit a provider cache: the tools, in order, and the system
    prompt before the first conversation turn (the billing block left out). A change between two turns of a
    session shows in its decision as `prefix_changed`."""
    system: list[str] = []
    for message in request.messages:
        if message.role != "system":
            break
        if not is_billing_block(text := message.text()):
            system.append(text)
    tools = [[t.name, t.description, t.parameters, t.extra] for t in request.tools]
    return hashlib.sha256(canonical([tools, system])).hexdigest()[:16]
