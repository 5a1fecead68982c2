"""Which session a request belongs to: the client's own session id where it sends one, else a hash of the
prefix that stays the same across a conversation's turns (its system prompt, tools and first user message).

Signals, first found wins (names taken from the clients themselves, docs/agents.md "Sessions"):
- Claude Code: the `x-claude-code-session-id` header; a subagent adds `x-claude-code-agent-id` (its own system
  prompt and tools, so its own provider cache); `metadata.user_id`, a JSON string with `session_id` (2.x) or the
  older `user_<hash>_account_<uuid>_session_<uuid>`.
- Codex: the `session_id` / `session-id` / `x-session-id` / `conversation_id` / `thread-id` headers, and the
  body's `prompt_cache_key` (Codex sets it to the conversation id); `x-openai-subagent` names a subagent.
- Anything else: `prefix:<hash>`. Two conversations with the same system prompt, tools and first message share
  one key, which is right for cache economics: a provider caches them as one prefix too.
The key is hashed before it is kept or logged: a session id is a correlator, not something to store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from daari.protocol.chat import ChatRequest
from daari.protocol.key_fields import is_billing_block

SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "session-id", "x-session-id", "conversation_id",
                   "thread-id")
SUBAGENT_HEADERS = ("x-claude-code-agent-id", "x-openai-subagent")
_LEGACY_SESSION_MARK = "_session_"


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def metadata_session(raw: Mapping[str, Any]) -> str | None:
    """The session id inside Anthropic `metadata.user_id`: JSON with `session_id`, or the legacy string form."""
    metadata = raw.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str) or not user_id:
        return None
    if user_id.startswith("{"):
        try:
            parsed = json.loads(user_id)
        except ValueError:
            return None
        session = parsed.get("session_id") if isinstance(parsed, dict) else None
        return session if isinstance(session, str) and session else None
    if _LEGACY_SESSION_MARK in user_id:
        session = user_id.rsplit(_LEGACY_SESSION_MARK, 1)[1]
        return session or None
    return None


def prefix_text(request: ChatRequest) -> str:
    """What stays the same across a conversation's turns: system text (billing block left out), tool names and
    the first user message."""
    system: list[str] = []
    first_user: str | None = None
    for message in request.messages:  # one pass, each text read once (every routed request)
        if message.role == "system":
            if not is_billing_block(text := message.text()):
                system.append(text)
        elif first_user is None and message.role == "user":
            first_user = message.text()
    return "\x1e".join([*system, ",".join([t.name for t in request.tools]), first_user or ""])


def session_key(request: ChatRequest, headers: Mapping[str, str]) -> str:
    """The request's session, hashed: `<hash>` of the client's id (plus its subagent id), or of its prefix."""
    return named_session_key(request, headers) or short_hash("prefix:" + prefix_text(request))


def named_session_key(request: ChatRequest, headers: Mapping[str, str]) -> str | None:
    """The session the client names (a header or a body field), hashed; None when it names none. Cheap: no
    prefix is read, so the L0 hit path can afford it."""
    found = _first_header(headers, SESSION_HEADERS) or _body_session(request)
    if found is None:
        return None
    agent = _first_header(headers, SUBAGENT_HEADERS)
    return short_hash(f"{found}/{agent}" if agent else found)


def _first_header(headers: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    """The first of `names` the client sent non-empty. A loop, not a generator: it runs on every L0 hit."""
    for name in names:
        value = headers.get(name)
        if value:
            return value
    return None


def _body_session(request: ChatRequest) -> str | None:
    raw = request.raw
    if request.protocol == "anthropic":
        return metadata_session(raw)
    key = raw.get("prompt_cache_key")
    return key if isinstance(key, str) and key else None
