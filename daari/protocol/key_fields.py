"""Which request fields belong in a cache key: the documented list of fields that cannot change an answer,
and the rule that every other field daari does not interpret is keyed as the client sent it.

Shared by every protocol's parser (chat completions, Messages, Responses): a parser names the fields it
interprets itself; `uninterpreted` returns the rest, minus the non-answer fields, for the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from typing import Any

from daari.jsonio import canonical
from daari.protocol.chat import Tool

# Top-level fields that cannot change the answer's content. Each one is here for a reason (docs/caching.md):
# transport (stream, stream_options), accounting and tracing (user, metadata, safety_identifier,
# client_metadata), storage on the provider's side (store), scheduling (service_tier: the same model, sooner
# or later) and the provider's own prompt cache (prompt_cache_key, prompt_cache_retention).
NON_ANSWER_FIELDS: dict[str, frozenset[str]] = {
    "openai": frozenset({
        "stream", "stream_options", "user", "metadata", "store", "service_tier", "prompt_cache_key",
        "prompt_cache_retention", "safety_identifier",
    }),
    "anthropic": frozenset({"stream", "metadata", "service_tier"}),
    "responses": frozenset({
        "stream", "stream_options", "user", "metadata", "store", "service_tier", "prompt_cache_key",
        "prompt_cache_retention", "safety_identifier", "client_metadata", "background",
    }),
}

# Inside content blocks, system blocks and tool definitions: markers for the provider's prompt cache.
NON_ANSWER_BLOCK_FIELDS = frozenset({"cache_control"})

# Claude Code's first system block: `x-anthropic-billing-header: cc_version=...; cc_entrypoint=...; cch=...;`.
# Per client version and per request (cch), never part of what is asked: forwarded, never keyed.
BILLING_HEADER_PREFIX = "x-anthropic-billing-header:"


def is_non_answer_field(protocol: str, name: str) -> bool:
    """True when top-level field `name` of a `protocol` request cannot change the answer."""
    return name in NON_ANSWER_FIELDS.get(protocol, frozenset())


def uninterpreted(protocol: str, body: Mapping[str, Any], interpreted: Collection[str]) -> dict[str, Any]:
    """The fields of `body` that the parser did not interpret and that can change the answer: they go into
    the cache key exactly as sent (a JSON null counts as absent)."""
    return {k: v for k, v in body.items()
            if k not in interpreted and v is not None and not is_non_answer_field(protocol, k)}


def without_cache_markers(block: Mapping[str, Any]) -> dict[str, Any]:
    """A content block or tool definition as it counts for the key: prompt-cache markers left out."""
    return {k: v for k, v in block.items() if k not in NON_ANSWER_BLOCK_FIELDS}


def is_billing_block(text: str) -> bool:
    """True for Claude Code's per-request billing system block (kept out of every key)."""
    return text.lstrip().startswith(BILLING_HEADER_PREFIX)


def tools_hash(tools: list[Tool]) -> str:
    """The tool definitions as every key holds them (L0's, and L1's lookup context): all of each definition."""
    schema = [{"name": t.name, "description": t.description, "parameters": t.parameters,
               **({"extra": t.extra} if t.extra else {})} for t in tools]
    return hashlib.sha256(canonical(schema)).hexdigest()
