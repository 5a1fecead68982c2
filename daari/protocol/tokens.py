"""A cheap token estimate (no tokenizer on the hot path): about four characters a token for English and code."""

from __future__ import annotations

import json

from daari.protocol.chat import ChatRequest, Message


def estimate_text_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def estimate_message_tokens(message: Message) -> int:
    tokens = 4 + estimate_text_tokens(message.text())  # per-message framing, as chat templates add
    for call in message.tool_calls:
        tokens += estimate_text_tokens(call.name) + estimate_text_tokens(call.arguments)
    return tokens


def estimate_request_tokens(request: ChatRequest) -> int:
    tokens = sum(estimate_message_tokens(m) for m in request.messages)
    for tool in request.tools:
        tokens += estimate_text_tokens(json.dumps(tool.parameters)) + estimate_text_tokens(tool.name)
        tokens += estimate_text_tokens(tool.description or "")
    return tokens
