"""Conversation hygiene across providers: an Anthropic body made acceptable to the provider it is sent to.

Providers sign the thinking blocks they produce (`thinking.signature`, `redacted_thinking.data`) and refuse a
block another provider signed (400 "Invalid signature"). daari records the provider of every thinking block it
serves (sessions/store.py); before a body goes to an Anthropic-protocol upstream:
- thinking blocks another provider signed are dropped; the upstream's own, and blocks daari never served
  (it cannot tell whose they are), are kept byte for byte, so a session back on its first provider sends that
  provider its own blocks unchanged;
- when the assistant turn of a tool loop still running (the messages after it are tool results) came from
  another provider (its thinking dropped, or its tool calls made elsewhere: daari records the provider of every
  tool-use id it serves too), `thinking` is turned off for this one request: Anthropic requires such a turn to
  start with the upstream's own thinking block, and a foreign one cannot be signed anew; `context_management`
  thinking edits go with it;
- tool-use ids Anthropic would refuse (outside `[a-zA-Z0-9_-]`, as some OpenAI-compatible servers write them,
  e.g. `functions.read:0`) are renamed the same way in `tool_use` and `tool_result`, every turn alike.
A body that needs none of this is returned as the same object: the prefix a provider cached stays byte-stable.
A translated request (any other protocol, or another upstream protocol) carries no thinking blocks at all.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

THINKING_BLOCKS = ("thinking", "redacted_thinking")
ANTHROPIC_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_THINKING_EDITS = "clear_thinking"

Producer = Callable[[str], "str | None"]


def provider_id(executor: str, base_url: str | None) -> str:
    """Whose signatures a tier's upstream accepts: one origin (scheme, host, port) of one API family. Claude
    models of one platform verify each other's blocks, so the model is not part of it."""
    if not base_url:
        return executor
    url = httpx.URL(base_url)
    port = f":{url.port}" if url.port else ""
    return f"{executor}:{url.scheme}://{url.host}{port}"


def signature_key(block: dict[str, Any]) -> str | None:
    """A thinking block's identity: a hash of what its provider signed it with."""
    kind = block.get("type")
    value = block.get("signature") if kind == "thinking" else block.get("data") if kind == "redacted_thinking" else None
    if not isinstance(value, str) or not value:
        return None
    return hashlib.sha256(f"{kind}\x00{value}".encode()).hexdigest()[:32]


def tool_key(call_id: str) -> str:
    """A tool-use id's identity in the producer ledger (the id is unique to the turn that made the call)."""
    return "tool:" + hashlib.sha256(call_id.encode()).hexdigest()[:24]


def served_signatures(message: dict[str, Any] | None) -> list[str]:
    """The signature keys of the thinking blocks in an Anthropic message daari served."""
    if not message:
        return []
    keys = [signature_key(b) for b in message.get("content") or [] if isinstance(b, dict)]
    return [k for k in keys if k is not None]


def _foreign_turn(message: dict[str, Any], provider: str, producer: Producer) -> bool:
    """An assistant turn whose tool calls another provider made and that holds no thinking block of `provider`'s."""
    content = message.get("content")
    if not isinstance(content, list):
        return False
    owners = {producer(tool_key(b["id"])) for b in content
              if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)}
    owners.discard(None)
    return bool(owners) and provider not in owners


@dataclass
class Cleaned:
    body: dict[str, Any]
    dropped: int = 0  # foreign thinking blocks left out
    thinking_off: bool = False  # thinking turned off for this request (a running tool loop's block was foreign)
    renamed_ids: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.thinking_off or self.renamed_ids)


def for_anthropic_upstream(body: dict[str, Any], provider: str, producer: Producer, *,
                           drop_unknown: bool = False) -> Cleaned:
    """`body` as the Anthropic-protocol upstream `provider` accepts it (see the module docstring).
    `drop_unknown`: also drop blocks daari cannot attribute (the retry after an upstream refused a signature)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return Cleaned(body)
    out: list[Any] = []
    dropped = renamed = 0
    loop_turn_dropped = False
    open_loop = _open_tool_loop_turn(messages)
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            out.append(message)
            continue
        blocks: list[Any] = []
        changed = False
        for block in content:
            if not isinstance(block, dict):
                blocks.append(block)
                continue
            if block.get("type") in THINKING_BLOCKS and message.get("role") == "assistant":
                key = signature_key(block)
                owner = producer(key) if key is not None else None
                if (owner is not None and owner != provider) or (owner is None and drop_unknown):
                    dropped += 1
                    changed = True
                    loop_turn_dropped = loop_turn_dropped or index == open_loop
                    continue
            renamed_block = _safe_ids(block)
            if renamed_block is not block:
                renamed += 1
                changed = True
            blocks.append(renamed_block)
        if not changed:
            out.append(message)
            continue
        if not blocks:
            blocks = [{"type": "text", "text": "(thinking)"}]  # an assistant turn that was only thinking
        out.append({**message, "content": blocks})
    foreign_loop = open_loop is not None and _foreign_turn(messages[open_loop], provider, producer)
    thinking_off = (loop_turn_dropped or foreign_loop) and _thinking_on(body)
    if not dropped and not renamed and not thinking_off:
        return Cleaned(body)
    cleaned = {**body, "messages": out}
    if thinking_off:
        cleaned.pop("thinking", None)
        _without_thinking_edits(cleaned)
    return Cleaned(cleaned, dropped, thinking_off, renamed)


def _open_tool_loop_turn(messages: list[Any]) -> int | None:
    """The index of the last assistant message when everything after it is tool results (a loop still running)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, dict):
            return None
        if message.get("role") == "assistant":
            return index
        content = message.get("content")
        if not isinstance(content, list) or not content or not all(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return None
    return None


def _thinking_on(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _without_thinking_edits(body: dict[str, Any]) -> None:
    management = body.get("context_management")
    if not isinstance(management, dict) or not isinstance(management.get("edits"), list):
        return
    edits = [e for e in management["edits"] if not (isinstance(e, dict)
                                                    and str(e.get("type", "")).startswith(_THINKING_EDITS))]
    if edits:
        body["context_management"] = {**management, "edits": edits}
    else:
        body.pop("context_management")


def safe_tool_id(call_id: str) -> str:
    """A tool-use id Anthropic accepts, the same for the same id every time (and unchanged when already valid)."""
    if ANTHROPIC_TOOL_ID.match(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', call_id)[:48]}_{digest}"


def _safe_ids(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    name = "id" if kind == "tool_use" else "tool_use_id" if kind == "tool_result" else None
    value = block.get(name) if name else None
    if name is None or not isinstance(value, str) or ANTHROPIC_TOOL_ID.match(value):
        return block
    return {**block, name: safe_tool_id(value)}
