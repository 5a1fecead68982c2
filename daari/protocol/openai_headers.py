"""The client headers an OpenAI-compatible or Responses upstream gets from an OpenAI or Responses client (an
allowlist, docs/agents.md), and the client's credential, kept apart for tiers with forward_client_key."""

from __future__ import annotations

from collections.abc import Mapping

from daari.protocol.anthropic_wire import SecretStr

# What Codex sends (codex-rs: `originator` and `user-agent` on every request, `version` and the
# OpenAI-Organization / OpenAI-Project env headers of the OpenAI provider, `OpenAI-Beta`, the session and
# thread ids, and the per-turn `x-codex-*` / `x-openai-*` headers of its model client) and what the OpenAI
# SDKs send for accounting (organization, project). They identify the client, the session and the account
# an upstream bills, or opt into API betas; none is a credential and none changes what is asked (so none is
# in the cache key: docs/caching.md). Never forwarded: Authorization (only as the credential below, and only
# by a forward_client_key tier), daari's own token and x-daari-* headers, cookies, `chatgpt-account-id`
# (it goes with a ChatGPT login token, which daari never forwards as such), SDK telemetry (x-stainless-*).
PASSTHROUGH_HEADERS = (
    "user-agent", "originator", "version", "openai-beta", "openai-organization", "openai-project",
    "session_id", "session-id", "x-session-id", "conversation_id", "thread-id", "x-client-request-id",
    "x-codex-beta-features", "x-codex-turn-state", "x-codex-turn-metadata", "x-codex-window-id",
    "x-codex-parent-thread-id", "x-codex-installation-id", "x-openai-subagent", "x-openai-memgen-request",
    "x-responsesapi-include-timing-metrics",
)
_PASSTHROUGH = frozenset(PASSTHROUGH_HEADERS)
CREDENTIAL_HEADER = "authorization"


def client_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted headers the client sent (lower-cased names), plus its Authorization as a SecretStr
    (never printed) for tiers with forward_client_key; the executor decides which of these it sends."""
    out: dict[str, str] = {}
    for key, value in headers.items():  # one pass over what the client sent (a few headers), not the allowlist
        name = key.lower()
        if value and name in _PASSTHROUGH:
            out[name] = value
        elif value and name == CREDENTIAL_HEADER:
            out[name] = SecretStr(value)
    return out


def forwarded_headers(protocol: str, passthrough: Mapping[str, str]) -> dict[str, str]:
    """What an OpenAI-compatible upstream gets of the client's headers: the allowlist, for a client of the
    OpenAI family only (an Anthropic client's user-agent or session id is not for an OpenAI upstream)."""
    if protocol not in ("openai", "responses"):
        return {}
    return {name: value for name, value in passthrough.items() if value and name in _PASSTHROUGH}
