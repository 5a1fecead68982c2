"""What L1 embeds and what it matches exactly (ADR-0004 section 3 and G1b).

MiniLM reads at most 256 word pieces, so a fold of the whole conversation would be filled by the system
prompt and make every request look alike. The embedded text is therefore the final user turn, role-marked,
with images and audio folded in as cache tokens (a hash of their bytes or URL). Everything else that
decides the answer (system prompt, earlier turns, the assistant's tool calls, tools, sampling) goes into
the exact lookup context (daari/semantic/context.py). For an agent turn the stable prefix is the history
minus the trailing tool results; those results are hashed into the context, so a changed last tool result
can never match the previous answer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from daari.jsonio import canonical
from daari.protocol.chat import ChatRequest, ContentPart, Message
from daari.routing.agent_turn import is_agent_turn
from daari.routing.normalize import normalize_message


@dataclass(frozen=True)
class Fold:
    """A request split into the text L1 embeds and the parts it must match exactly."""

    embed_text: str  # "user: ..." with media cache tokens; "" when there is no user turn to embed
    exact: dict[str, Any]  # JSON-able; hashed into the lookup context
    agent_turn: bool


def media_token(part: ContentPart) -> str:
    """A non-text part as a short cache token: a hash of its bytes (data) or its URL, and its kind."""
    kind = str(part.get("type", "media"))
    source = part.get("data") or part.get("url") or canonical(part).decode()
    digest = hashlib.sha256(str(source).encode()).hexdigest()[:16]
    return f"[{kind}:{digest}]"


def message_embed_chunk(message: Message) -> str:
    """One message as embed text: its text with every non-text part as a cache token, in order."""
    content = message.content
    if content is None:
        body = ""
    elif isinstance(content, str):
        body = content
    else:
        body = " ".join(p.get("text", "") if p.get("type") == "text" else media_token(p) for p in content)
    return f"{message.role}: {body.strip()}"


def trailing_tool_results(messages: list[Message]) -> int:
    """How many messages at the end are tool results (the part of an agent turn matched exactly)."""
    count = 0
    for message in reversed(messages):
        if message.role != "tool":
            break
        count += 1
    return count


def _content_json(content: str | list[ContentPart] | None) -> str | list[str] | None:
    """Content with images by their cache token: the same picture hashes the same way however it is sent."""
    if isinstance(content, list):
        return [str(p.get("text", "")) if p.get("type") == "text" else media_token(p) for p in content]
    return content


def _message_json(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": _content_json(message.content), "name": message.name,
            "is_error": message.is_error, "tool_calls": [[c.name, c.arguments] for c in message.tool_calls],
            "tool_call_id": message.tool_call_id}


def fold(request: ChatRequest) -> Fold:
    """The L1 fold of `request` (normalized like the L0 key, so whitespace-only differences fold)."""
    agent = is_agent_turn(request)
    if request.shapes.unknown:  # a shape daari cannot read may change the answer: L1 never guesses at it
        return Fold(embed_text="", exact={}, agent_turn=agent)
    messages = [normalize_message(m) for m in request.messages]
    trailing = trailing_tool_results(messages) if agent else 0
    prefix = messages[: len(messages) - trailing]
    last_user = max((i for i, m in enumerate(prefix) if m.role == "user"), default=None)
    embed_text = message_embed_chunk(prefix[last_user]) if last_user is not None else ""
    # Tool-call ids are the client's bookkeeping; which calls were made and with what arguments is not.
    others = [_message_json(m) for i, m in enumerate(prefix) if i != last_user]
    exact: dict[str, Any] = {
        "others": others,
        "embedded_at": last_user,
        "trailing_tool_results": [_tool_result_json(m) for m in messages[len(messages) - trailing:]],
    }
    return Fold(embed_text=embed_text, exact=exact, agent_turn=agent)


def _tool_result_json(message: Message) -> list[Any]:
    return [message.tool_call_id is not None, _content_json(message.content), message.is_error]
