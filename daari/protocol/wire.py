"""One object per client protocol, so the pipeline speaks to OpenAI and Anthropic clients the same way."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from daari.errors import DaariError
from daari.protocol import anthropic_render, anthropic_wire, openai_render, openai_wire
from daari.protocol.chat import ChatRequest, Completion
from daari.protocol.events import Event


class StreamRenderer(Protocol):
    def start(self) -> list[bytes]: ...
    def event(self, event: Event) -> list[bytes]: ...
    def finish(self, meta: dict[str, Any]) -> list[bytes]: ...
    def error(self, err: DaariError, meta: dict[str, Any]) -> list[bytes]: ...


@dataclass(frozen=True)
class Wire:
    name: str
    parse: Callable[[Any, Mapping[str, str]], ChatRequest]
    render: Callable[[Completion, ChatRequest, dict[str, Any]], dict[str, Any]]
    stream_renderer: Callable[[ChatRequest], StreamRenderer]
    render_error: Callable[[DaariError], tuple[int, dict[str, Any]]]


def _openai_id() -> tuple[str, int]:
    return "chatcmpl-" + secrets.token_hex(12), int(time.time())


def _openai_render(completion: Completion, request: ChatRequest, meta: dict[str, Any]) -> dict[str, Any]:
    response_id, created = _openai_id()
    return openai_render.render_completion(completion, request, meta, response_id, created)


def _openai_stream(request: ChatRequest) -> StreamRenderer:
    response_id, created = _openai_id()
    return openai_render.OpenAIStreamRenderer(request, response_id, created)


def _anthropic_id() -> str:
    return "msg_" + secrets.token_hex(12)


OPENAI = Wire(
    name="openai",
    parse=openai_wire.parse_chat_request,
    render=_openai_render,
    stream_renderer=_openai_stream,
    render_error=openai_render.render_error,
)

ANTHROPIC = Wire(
    name="anthropic",
    parse=anthropic_wire.parse_messages_request,
    render=lambda c, r, m: anthropic_render.render_message(c, r, m, _anthropic_id()),
    stream_renderer=lambda r: anthropic_render.AnthropicStreamRenderer(r, _anthropic_id()),
    render_error=anthropic_render.render_error,
)
