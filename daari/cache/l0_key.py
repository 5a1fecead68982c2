"""L0Key: SHA-256 over a canonical encoding of everything that can change an answer.

In the key: normalized messages (tool messages and tool calls included), model, temperature (absent is
not 0), a hash of the tools schema, the sampling fingerprint, the tier override, and the credential
partition (when there is one). Not in the key: `stream` and `stream_options` (a stored answer serves
both), the client's protocol (a stored answer is protocol-neutral), other headers, and the fields
`daari.protocol.key_fields` lists as unable to change an answer (`user`, `metadata`, prompt-cache markers,
Claude Code's billing block...). Every other field the client sent and daari does not interpret
(`ChatRequest.extra`, `Tool.extra`) is in the key as sent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from daari.jsonio import canonical
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.key_fields import tools_hash, without_cache_markers
from daari.routing.normalize import normalize_message

KEY_VERSION = 2  # 2: canonical JSON by orjson


@dataclass(frozen=True)
class L0Key:
    digest: str  # hex SHA-256

    def __str__(self) -> str:
        return self.digest


def _message_json(message: Message) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content if not isinstance(message.content, list)
        else [without_cache_markers(p) for p in message.content],
        "tool_calls": [[c.id, c.name, c.arguments] for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "is_error": message.is_error,
    }


def keyed_override(tier_override: str | None) -> str | None:
    """The tier override as the L0 key holds it. A model tier's keeps its answers apart from the ordinary ones;
    `L0` asks for the answer an ordinary request stored (it never stores one itself), so it is keyed as none."""
    return None if tier_override == "L0" else tier_override


def l0_key(request: ChatRequest, tier_override: str | None = None, partition: str = "") -> L0Key:
    """`partition` (daari/cache/partition.py) keeps answers paid with one credential from every other."""
    payload = {
        "v": KEY_VERSION,
        "messages": [_message_json(normalize_message(m)) for m in request.messages],
        "model": request.model,
        "temperature": request.temperature,
        "tools": tools_hash(request.tools) if request.tools else None,
        "sampling": request.sampling,
        "override": tier_override,
    }
    if request.extra:  # absent when empty, so keys of requests without such fields did not change
        payload["extra"] = request.extra
    if partition:  # the shared partition keeps the keys it always had
        payload["partition"] = partition
    return L0Key(hashlib.sha256(canonical(payload)).hexdigest())
