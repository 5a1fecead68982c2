"""One object per client protocol, so the pipeline speaks to OpenAI and Anthropic clients the same way."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from daari.errors import DaariError
from daari.ids import unique_hex
from daari.protocol import (
    anthropic_render,
    anthropic_wire,
    openai_render,
    openai_wire,
    responses_render,
    responses_stream,
    responses_wire,
)
from daari.protocol.chat import ChatRequest, Completion
from daari.protocol.events import Event, Finish, NativeEvent, replay
from daari.protocol.openai_headers import client_headers


class StreamRenderer(Protocol):
    def start(self) -> list[bytes]: ...
    def event(self, event: Event) -> list[bytes]: ...
    def finish(self, meta: dict[str, Any]) -> list[bytes]: ...
    def error(self, err: DaariError, meta: dict[str, Any]) -> list[bytes]: ...


@dataclass(frozen=True)
class Wire:
    name: str
    parse: Callable[[Any, Mapping[str, str]], ChatRequest]
    # The part of `parse` that reads headers: a request's `passthrough_headers` from the client's headers.
    passthrough: Callable[[Mapping[str, str]], dict[str, str]]
    # (completion, request, meta, events): events may carry the upstream's own body (NativeEvent).
    render: Callable[[Completion, ChatRequest, dict[str, Any], list[Event]], dict[str, Any]]
    stream_renderer: Callable[[ChatRequest], StreamRenderer]
    render_error: Callable[[DaariError], tuple[int, dict[str, Any]]]
    # The upstream's own message in this protocol, from an answer's events (stored with it in L0).
    capture_native: Callable[[list[Event]], dict[str, Any] | None]
    # The events that replay a stored answer to a client of this protocol (`stream`: as a stream).
    replay: Callable[[Completion, bool], list[Event]]


def _openai_id() -> tuple[str, int]:
    return "chatcmpl-" + unique_hex(), int(time.time())


def _openai_render(completion: Completion, request: ChatRequest, meta: dict[str, Any],
                   events: list[Event]) -> dict[str, Any]:
    response_id, created = _openai_id()
    return openai_render.render_completion(completion, request, meta, response_id, created)


def _openai_stream(request: ChatRequest) -> StreamRenderer:
    response_id, created = _openai_id()
    return openai_render.OpenAIStreamRenderer(request, response_id, created)


def _neutral_replay(completion: Completion, stream: bool) -> list[Event]:
    return list(replay(completion)) if stream else []


def _anthropic_replay(completion: Completion, stream: bool) -> list[Event]:
    """A stored native message replays whole (thinking blocks and signatures included), else neutrally."""
    if completion.native is None or completion.native.get("type") != "message":
        return _neutral_replay(completion, stream)
    return [NativeEvent("anthropic", "message", completion.native),
            Finish(reason=completion.finish_reason, usage=completion.usage,
                   stop_sequence=completion.stop_sequence, model=completion.model)]


def _anthropic_id() -> str:
    return "msg_" + unique_hex()


def _anthropic_render(completion: Completion, request: ChatRequest, meta: dict[str, Any],
                      events: list[Event]) -> dict[str, Any]:
    """An Anthropic upstream's own message body passes through (thinking blocks and all) when there is one."""
    native = next((e.data for e in events if isinstance(e, NativeEvent) and e.protocol == "anthropic"
                   and e.name == "message"), None)
    return anthropic_render.render_message(completion, request, meta, _anthropic_id(), native=native)


OPENAI = Wire(
    name="openai",
    parse=openai_wire.parse_chat_request,
    passthrough=client_headers,
    render=_openai_render,
    stream_renderer=_openai_stream,
    render_error=openai_render.render_error,
    capture_native=lambda events: None,
    replay=_neutral_replay,
)

ANTHROPIC = Wire(
    name="anthropic",
    parse=anthropic_wire.parse_messages_request,
    passthrough=anthropic_wire.passthrough_headers,
    render=_anthropic_render,
    stream_renderer=lambda r: anthropic_render.AnthropicStreamRenderer(r, _anthropic_id()),
    render_error=anthropic_render.render_error,
    capture_native=anthropic_render.native_message,
    replay=_anthropic_replay,
)


def make_responses_wire(on_final: Callable[[dict[str, Any]], None] | None = None) -> Wire:
    """The Responses API wire for one request; `on_final` sees the final response object before it is sent
    (the route stores it for previous_response_id and GET /v1/responses/{id})."""

    def render(completion: Completion, request: ChatRequest, meta: dict[str, Any],
               events: list[Event]) -> dict[str, Any]:
        body = responses_render.render_response(completion, request, meta, events,
                                                responses_render.new_id("resp"), responses_render.now())
        if on_final is not None:
            on_final(body)
        return body

    def stream_renderer(request: ChatRequest) -> StreamRenderer:
        return responses_stream.ResponsesStreamRenderer(request, responses_render.new_id("resp"),
                                                        responses_render.now(), on_final)

    return Wire(
        name="responses",
        parse=responses_wire.parse_responses_request,
        passthrough=client_headers,
        render=render,
        stream_renderer=stream_renderer,
        render_error=openai_render.render_error,
        capture_native=responses_render.capture_native,
        replay=responses_render.replay,
    )


RESPONSES = make_responses_wire()
