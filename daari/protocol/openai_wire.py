"""OpenAI chat-completions requests: read a client's body, checked against its declared schema
(`openai_schema`), into a `ChatRequest`, and build the body daari sends to an OpenAI-compatible upstream from
any `ChatRequest`.

Choices made here, because clients differ from the reference API:
- `model` missing: many local clients omit it, so it defaults to DEFAULT_MODEL ("daari") instead of a 400.
- A JSON null for an optional field means the field is absent (clients send `"temperature": null`), and so
  does an empty `stop` list.
- Role "developer" is read as "system". The legacy role "function" and the legacy top-level `functions` /
  `function_call` fields are rejected with a message naming the replacement: dropping a tool definition
  silently would let a tier answer without the tools the client relies on.
- Content parts other than text and image_url (input_audio, file, future types) are kept verbatim: an
  OpenAI-compatible upstream gets them unchanged, the cache key hashes them whole, a tier of the other
  protocol gets what has an equivalent (`file` PDFs become documents) and a clear 400 otherwise. Assistant
  "refusal" parts are read as text.
- `max_completion_tokens` folds into sampling["max_tokens"]; `raw` remembers which name the client used, and
  `to_upstream_body` sends it back under that name (OpenAI's reasoning models accept only that one).
- Fields daari does not interpret (reasoning_effort, verbosity, service_tier, prediction, modalities,
  audio, web_search_options, future fields) go into `extra` (the cache key) unless
  `daari.protocol.key_fields` lists them as unable to change the answer (user, metadata, store...); tool
  definition fields beyond name/description/parameters (`strict`) go into `Tool.extra`.
- The client's `Authorization` is kept as a `SecretStr` in `passthrough_headers`; only a tier with
  `forward_client_key` sends it upstream. The other headers kept there are `openai_headers.PASSTHROUGH_HEADERS`
  (Codex's originator, session ids...), forwarded to OpenAI-compatible upstreams.

Upstream body choices (`to_upstream_body`). A request that came in as OpenAI chat is sent as the client
wrote it (messages, content parts and every field), with only `model`, `stream` and `stream_options`
set by daari, and tool_choice / parallel_tool_calls left out without tools. Anything else is translated:
- system, assistant and tool content is sent as one string (text parts joined): many OpenAI-compatible
  servers accept only strings there. User content keeps its parts (text and image_url).
- An Anthropic tool result with is_error is sent with TOOL_ERROR_PREFIX before its text, as OpenAI tool
  messages have no error flag; images inside tool results are dropped (OpenAI tool messages are text only).
- top_k (Anthropic) is not an OpenAI parameter and is not sent. tool_choice and parallel_tool_calls are sent
  only with tools (OpenAI rejects them otherwise); an Anthropic-shaped tool_choice is translated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from daari.errors import InvalidRequest
from daari.protocol import openai_schema
from daari.protocol.anthropic_wire import EFFORT_BUDGET
from daari.protocol.chat import NO_SHAPES, ChatRequest, ContentPart, Message, Role, Tool, ToolCall, WireShapes
from daari.protocol.key_fields import uninterpreted, without_cache_markers
from daari.protocol.openai_headers import client_headers
from daari.protocol.schema import Path, check, fail

DEFAULT_MODEL = "daari"
TOOL_ERROR_PREFIX = "Error: "

_ROLES: dict[str, Role] = {
    "system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool",
}
# Sampling keys passed through as the client set them (their types are declared in openai_schema).
_SAMPLING_KEYS = (
    "top_p", "stop", "n", "seed", "tool_choice", "response_format", "presence_penalty", "frequency_penalty",
    "logit_bias", "logprobs", "top_logprobs", "parallel_tool_calls",
)
_SAMPLING_SET = frozenset(_SAMPLING_KEYS)
_NOT_UPSTREAM = ("top_k", "thinking")  # Anthropic-only parameters
# Top-level fields the parser reads itself; every other field is `extra` (or a non-answer field).
_INTERPRETED = frozenset({"model", "messages", "stream", "stream_options", "temperature", "tools",
                          "max_tokens", "max_completion_tokens", *_SAMPLING_KEYS})
_TOOL_FIELDS = ("type", "function")
_FUNCTION_FIELDS = ("name", "description", "parameters")
# Content part types daari knows; any other is a new client shape (carried whole, and counted).
KNOWN_PARTS = ("text", "image_url", "refusal", "input_audio", "file")


def _image(url: str, at: Path) -> ContentPart:
    if url.startswith("data:"):
        head, comma, data = url[5:].partition(",")
        media_type, _, encoding = head.partition(";")
        if not comma or encoding != "base64" or not media_type:
            raise fail("a data: image URL must look like data:<media type>;base64,<data>", (*at, "image_url", "url"),
                       "openai")
        return {"type": "image", "media_type": media_type, "data": data}
    return {"type": "image", "url": url}


def _content(content: str | list[Any] | None, role: Role, at: Path,
             unknown: list[str]) -> str | list[ContentPart] | None:
    if content is None or isinstance(content, str):
        return content
    shapes = openai_schema.PARTS.get(role, openai_schema.OTHER_PARTS)
    parts: list[ContentPart] = []
    for j, part in enumerate(content):
        if isinstance(part, str):  # a bare string part: some clients send it, it can only mean text
            parts.append({"type": "text", "text": part})
            continue
        read = shapes.one(part, "openai", (*at, j))
        kind = part["type"]
        if type(read) is openai_schema.TextPart:
            parts.append({"type": "text", "text": read.text})
        elif type(read) is openai_schema.RefusalPart:
            parts.append({"type": "text", "text": read.refusal})
        elif type(read) is openai_schema.ImageUrlPart:
            url = read.image_url if isinstance(read.image_url, str) else read.image_url.url
            parts.append(_image(url, (*at, j)))
        elif kind in openai_schema.ROLE_BOUND_PARTS:
            allowed = "text and image_url" if role == "user" else "text and refusal" if role == "assistant" else "text"
            raise fail(f"content part type {kind!r} is not supported in a {role} message (allowed: {allowed})",
                       (*at, j, "type"), "openai")
        else:
            if kind not in KNOWN_PARTS:
                unknown.append(f"content_part:{kind}")
            parts.append(dict(part))  # input_audio, file, future types: carried whole (and keyed whole)
    return parts


def _tool_calls(calls: list[openai_schema.ToolCallParam]) -> list[ToolCall]:
    out: list[ToolCall] = []
    for call in calls:
        arguments = call.function.arguments
        if isinstance(arguments, dict):  # a sloppy client sent the object, not its JSON text
            arguments = json.dumps(arguments, separators=(",", ":"))
        out.append(ToolCall(id=call.id, name=call.function.name, arguments=arguments))
    return out


def _message(read: openai_schema.MessageParam, i: int, unknown: list[str]) -> Message:
    at: Path = ("messages", i)
    if read.role == "function":
        raise fail("the legacy 'function' role is not supported: send 'tool' messages with tool_call_id",
                   (*at, "role"), "openai")
    role = _ROLES[read.role]
    message = Message(role=role, content=_content(read.content, role, (*at, "content"), unknown), name=read.name)
    if role == "assistant":
        message.tool_calls = _tool_calls(read.tool_calls or [])
        if read.function_call is not None:
            raise fail("the legacy 'function_call' is not supported: send 'tool_calls'", (*at, "function_call"),
                       "openai")
    elif role == "tool":
        if not read.tool_call_id:
            raise fail(f"'messages[{i}].tool_call_id' is required for a tool message", (*at, "tool_call_id"),
                       "openai")
        message.tool_call_id = read.tool_call_id
    return message


def _tools(tools: list[openai_schema.ToolParam], sent: list[dict[str, Any]]) -> list[Tool]:
    out: list[Tool] = []
    for tool, definition in zip(tools, sent, strict=True):
        function = tool.function
        extra = {k: v for k, v in definition["function"].items() if k not in _FUNCTION_FIELDS}
        extra.update({k: v for k, v in definition.items() if k not in _TOOL_FIELDS})
        parameters = (definition["function"]["parameters"] if function.parameters is not None  # as sent
                      else {"type": "object", "properties": {}})
        out.append(Tool(name=function.name, description=function.description, parameters=parameters,
                        extra=without_cache_markers(extra)))
    return out


def _sampling(read: openai_schema.ChatBody, body: Mapping[str, Any]) -> dict[str, Any]:
    # The values as the client sent them (1 stays 1, not 1.0: the cache key hashes them).
    # In _SAMPLING_KEYS' order (the upstream body's); most bodies set none of them, found in C first.
    sampling = {key: body[key] for key in _SAMPLING_KEYS if body.get(key) is not None} \
        if not _SAMPLING_SET.isdisjoint(body) else {}
    if (read.n or 1) > 1:
        # Every tier and the cache hold one answer per request; n > 1 would silently lose the others.
        raise fail("'n' must be 1: daari answers with one choice per request (send n requests instead)", ("n",),
                   "openai")
    if read.stop == []:  # some clients (Zed) always send an empty list: it means no stop sequences
        del sampling["stop"]
    if isinstance(read.tool_choice, openai_schema.NamedToolChoice):
        # The neutral form of a forced tool, shared with Anthropic requests (and so with their L0 keys).
        sampling["tool_choice"] = {"name": read.tool_choice.function.name}
    limit = "max_completion_tokens" if read.max_completion_tokens is not None else "max_tokens"
    if body.get(limit) is not None:  # the newer name wins: OpenAI documents max_tokens as its deprecated alias
        sampling["max_tokens"] = body[limit]
    return sampling


def parse_chat_request(body: object, headers: Mapping[str, str]) -> ChatRequest:
    """Check an OpenAI chat-completions body against its declared schema (`openai_schema`) and read it into a
    neutral `ChatRequest`; raise `InvalidRequest` naming the first bad field."""
    if not isinstance(body, dict):
        raise fail("the request body must be a JSON object", ("body",), "openai")
    for legacy in ("functions", "function_call"):
        if body.get(legacy) is not None:
            raise fail(f"the legacy '{legacy}' field is not supported: use 'tools' and 'tool_choice'", (legacy,),
                       "openai")
    read: openai_schema.ChatBody = check(body, openai_schema.ChatBody, "openai")
    unknown: list[str] = []
    messages = [_message(m, i, unknown) for i, m in enumerate(read.messages)]
    return ChatRequest(
        messages=messages,
        model=read.model if read.model is not None else DEFAULT_MODEL,
        protocol="openai",
        stream=bool(read.stream),
        temperature=read.temperature,
        tools=_tools(read.tools, body["tools"]) if read.tools else [],
        sampling=_sampling(read, body),
        include_usage=bool((read.stream_options or {}).get("include_usage")),
        raw=body,
        passthrough_headers=client_headers(headers),
        extra=uninterpreted("openai", body, _INTERPRETED),
        shapes=WireShapes(unknown=tuple(unknown)) if unknown else NO_SHAPES,
    )


def native_only_reason(request: ChatRequest) -> str | None:
    """Why only an OpenAI-compatible chat upstream can serve this request: a content part (input_audio, a
    file, a future type) that no other tier can read; a local model would answer as if it were not there."""
    if request.protocol != "openai":
        return None
    for message in request.messages:
        for part in message.content if isinstance(message.content, list) else []:
            if part.get("type") not in ("text", "image"):
                return f"content part type {part.get('type')!r}"
    return None


# --- the other direction: a neutral request as an OpenAI-compatible upstream wants it ---------------------

def _part_to_wire(part: ContentPart) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "image":
        url = part.get("url") or f"data:{part.get('media_type')};base64,{part.get('data', '')}"
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    source = part.get("source") if kind == "document" else None
    if isinstance(source, dict) and source.get("type") == "base64":
        data = f"data:{source.get('media_type')};base64,{source.get('data', '')}"
        return {"type": "file", "file": {"filename": part.get("title") or "document", "file_data": data}}
    raise InvalidRequest(f"content block type {kind!r} has no OpenAI chat equivalent: send it to an "
                         "Anthropic tier, or leave it out", param="messages")


def _message_to_wire(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if message.role == "user" and isinstance(message.content, list):
        out["content"] = [_part_to_wire(p) for p in message.content]
    elif message.role == "tool":
        text = message.text()
        out["content"] = TOOL_ERROR_PREFIX + text if message.is_error else text
        out["tool_call_id"] = message.tool_call_id
    elif message.role == "assistant" and message.tool_calls:
        out["content"] = message.text() or None
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    else:
        out["content"] = message.text()
    if message.name and message.role != "tool":
        out["name"] = message.name
    return out


def _tool_choice_to_wire(choice: Any) -> Any:
    """OpenAI's tool_choice from either protocol's shape (Anthropic: {"type": auto|any|tool|none})."""
    if isinstance(choice, dict) and "function" not in choice:
        if "name" in choice and "type" not in choice:  # the neutral forced tool
            return {"type": "function", "function": {"name": choice["name"]}}
        kind = choice.get("type")
        if kind == "tool" and choice.get("name"):
            return {"type": "function", "function": {"name": choice["name"]}}
        return {"any": "required", "auto": "auto", "none": "none"}.get(str(kind), "auto")
    return choice


def to_upstream_body(request: ChatRequest, model: str | None, stream: bool, *,
                     translate_options: bool = False) -> dict[str, Any]:
    """The chat-completions body for an OpenAI-compatible upstream; `model` None keeps the client's.
    `translate_options`: an Anthropic request's thinking budget and strict tools are translated too."""
    if request.protocol == "openai" and request.raw:
        return _native_body(request, model, stream)
    body: dict[str, Any] = {
        "model": model or request.model,
        "messages": [_message_to_wire(m) for m in request.messages],
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    for key, value in request.sampling.items():
        if key in _NOT_UPSTREAM or (key in ("tool_choice", "parallel_tool_calls") and not request.tools):
            continue
        body[key] = _tool_choice_to_wire(value) if key == "tool_choice" else value
    if "max_tokens" in body and request.protocol == "openai" and request.raw.get("max_completion_tokens"):
        body["max_completion_tokens"] = body.pop("max_tokens")
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {
                "name": t.name, **({"description": t.description} if t.description else {}),
                "parameters": t.parameters}}
            for t in request.tools
        ]
    if translate_options:
        _translate_extra(request, body)
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _native_body(request: ChatRequest, model: str | None, stream: bool) -> dict[str, Any]:
    """The client's own body: every field it sent reaches the upstream unchanged, except what daari owns."""
    body = dict(request.raw)
    body["model"] = model or request.model
    body["stream"] = stream
    if stream:  # daari needs the usage chunk; the client's other stream options stay
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    else:
        body.pop("stream_options", None)
    if not request.tools:  # OpenAI rejects these without tools
        body.pop("tool_choice", None)
        body.pop("parallel_tool_calls", None)
    return body


def _translate_extra(request: ChatRequest, body: dict[str, Any]) -> None:
    """Fields of an Anthropic request with an OpenAI equivalent: output_config.effort or a thinking budget ->
    reasoning_effort, tool strict -> function strict."""
    thinking = request.sampling.get("thinking")
    output_config = request.extra.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if effort in EFFORT_BUDGET or effort == "max":
        body["reasoning_effort"] = "high" if effort == "max" else effort
    elif isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        budget = budget if isinstance(budget, int) else EFFORT_BUDGET["medium"]
        body["reasoning_effort"] = ("low" if budget < EFFORT_BUDGET["medium"]
                                    else "medium" if budget < EFFORT_BUDGET["high"] else "high")
    for wire_tool, tool in zip(body.get("tools") or [], request.tools, strict=True):
        if isinstance(tool.extra.get("strict"), bool):
            wire_tool["function"]["strict"] = tool.extra["strict"]
