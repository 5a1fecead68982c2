"""An eval prompt (one JSONL line) as the request body daari is sent, and as the parsed ChatRequest."""

from __future__ import annotations

from typing import Any

from daari.protocol.chat import ChatRequest
from daari.protocol.openai_wire import parse_chat_request


def request_body(prompt: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The OpenAI chat body for a prompt: model `daari`, temperature 0, the prompt's own max_tokens if any."""
    body: dict[str, Any] = {"model": "daari", "messages": prompt["messages"], "temperature": 0,
                            "max_tokens": prompt.get("max_tokens", max_tokens)}
    if prompt.get("tools"):
        body["tools"] = prompt["tools"]
    return body


def to_request(prompt: dict[str, Any], max_tokens: int = 48) -> ChatRequest:
    """Parsed exactly as daari parses it, so offline classification sees what the server sees."""
    return parse_chat_request(request_body(prompt, max_tokens), {})
