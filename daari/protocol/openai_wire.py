"""OpenAI chat-completions requests: parse and validate a client's body into a `ChatRequest`, and build the
body daari sends to an OpenAI-compatible upstream from any `ChatRequest`.

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
from collections.abc import Callable, Mapping
from typing import Any

from daari.errors import InvalidRequest
from daari.protocol.anthropic_wire import EFFORT_BUDGET
from daari.protocol.chat import ChatRequest, ContentPart, Message, Role, Tool, ToolCall, WireShapes
from daari.protocol.key_fields import uninterpreted, without_cache_markers
from daari.protocol.openai_headers import client_headers

DEFAULT_MODEL = "daari"
TOOL_ERROR_PREFIX = "Error: "

_ROLES: dict[str, Role] = {
    "system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool",
}
# Sampling keys passed through as the client set them (validated below where a wrong type is common).
_SAMPLING_KEYS = (
    "top_p", "stop", "n", "seed", "tool_choice", "response_format", "presence_penalty", "frequency_penalty",
    "logit_bias", "logprobs", "top_logprobs", "parallel_tool_calls",
)
_NOT_UPSTREAM = ("top_k", "thinking")  # Anthropic-only parameters
# Top-level fields the parser reads itself; every other field is `extra` (or a non-answer field).
_INTERPRETED = frozenset({"model", "messages", "stream", "stream_options", "temperature", "tools",
                          "max_tokens", "max_completion_tokens", *_SAMPLING_KEYS})
_TOOL_FIELDS = ("type", "function")
_FUNCTION_FIELDS = ("name", "description", "parameters")
# Content part types daari knows; any other is a new client shape (carried whole, and counted).
KNOWN_PARTS = ("text", "image_url", "refusal", "input_audio", "file")


def _fail(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(body: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if not _is_number(value) or not low <= value <= high:
        raise _fail(f"'{key}' must be a number between {low:g} and {high:g}, got {value!r}", key)
    return float(value)


def _int(body: Mapping[str, Any], key: str, low: int, high: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not _is_int(value) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise _fail(f"'{key}' must be an integer {bound}, got {value!r}", key)
    return int(value)


def _bool(body: Mapping[str, Any], key: str) -> bool | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise _fail(f"'{key}' must be a boolean, got {value!r}", key)
    return value


def _image_part(part: Mapping[str, Any], param: str) -> ContentPart:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image if isinstance(image, str) else None
    if not isinstance(url, str) or not url:
        raise _fail("an image_url part needs image_url.url (an http(s) or data: URL)",
                    f"{param}.image_url.url")
    if url.startswith("data:"):
        head, comma, data = url[5:].partition(",")
        media_type, _, encoding = head.partition(";")
        if not comma or encoding != "base64" or not media_type:
            raise _fail("a data: image URL must look like data:<media type>;base64,<data>",
                        f"{param}.image_url.url")
        return {"type": "image", "media_type": media_type, "data": data}
    return {"type": "image", "url": url}


def _content(value: object, role: Role, param: str) -> str | list[ContentPart] | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _fail(f"'{param}' must be a string, null, or a list of content parts", param)
    parts: list[ContentPart] = []
    for j, part in enumerate(value):
        where = f"{param}[{j}]"
        if isinstance(part, str):  # a bare string part: some clients send it, it can only mean text
            parts.append({"type": "text", "text": part})
            continue
        if not isinstance(part, dict):
            raise _fail(f"'{where}' must be a content part object", where)
        kind = part.get("type")
        if kind in ("text", "refusal") and (kind == "text" or role == "assistant"):
            text = part.get(kind)
            if not isinstance(text, str):
                raise _fail(f"a {kind} part needs '{kind}' as a string", f"{where}.{kind}")
            parts.append({"type": "text", "text": text})
        elif kind == "image_url" and role == "user":
            parts.append(_image_part(part, where))
        elif kind in ("image_url", "refusal"):
            allowed = "text and image_url" if role == "user" else "text"
            raise _fail(f"content part type {kind!r} is not supported in a {role} message "
                        f"(allowed: {allowed})", f"{where}.type")
        elif isinstance(kind, str) and kind:
            parts.append(dict(part))  # input_audio, file, future types: carried whole (and keyed whole)
        else:
            raise _fail("every content part needs a string 'type'", f"{where}.type")
    return parts


def _tool_calls(value: object, param: str) -> list[ToolCall]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(f"'{param}' must be a list", param)
    calls: list[ToolCall] = []
    for k, call in enumerate(value):
        where = f"{param}[{k}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise _fail(f"'{where}' must be an object with 'function'", f"{where}.function")
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise _fail(f"'{where}.id' must be a non-empty string", f"{where}.id")
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise _fail(f"'{where}.function.name' must be a non-empty string", f"{where}.function.name")
        arguments = function.get("arguments", "")
        if isinstance(arguments, dict):  # a sloppy client sent the object, not its JSON text
            arguments = json.dumps(arguments, separators=(",", ":"))
        if not isinstance(arguments, str):
            raise _fail(f"'{where}.function.arguments' must be a JSON string", f"{where}.function.arguments")
        calls.append(ToolCall(id=call["id"], name=function["name"], arguments=arguments))
    return calls


def _message(value: object, i: int) -> Message:
    param = f"messages[{i}]"
    if not isinstance(value, dict):
        raise _fail(f"'{param}' must be an object", param)
    raw_role = value.get("role")
    if raw_role == "function":
        raise _fail("the legacy 'function' role is not supported: send 'tool' messages with tool_call_id",
                    f"{param}.role")
    if not isinstance(raw_role, str) or raw_role not in _ROLES:
        raise _fail(f"'{param}.role' must be one of {', '.join(_ROLES)}, got {raw_role!r}", f"{param}.role")
    role = _ROLES[raw_role]
    message = Message(role=role, content=_content(value.get("content"), role, f"{param}.content"))
    name = value.get("name")
    if name is not None:
        if not isinstance(name, str):
            raise _fail(f"'{param}.name' must be a string", f"{param}.name")
        message.name = name
    if role == "assistant":
        message.tool_calls = _tool_calls(value.get("tool_calls"), f"{param}.tool_calls")
        if value.get("function_call") is not None:
            raise _fail("the legacy 'function_call' is not supported: send 'tool_calls'",
                        f"{param}.function_call")
    if role == "tool":
        call_id = value.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _fail(f"'{param}.tool_call_id' is required for a tool message", f"{param}.tool_call_id")
        message.tool_call_id = call_id
    return message


def _tools(value: object) -> list[Tool]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail("'tools' must be a list", "tools")
    tools: list[Tool] = []
    for k, tool in enumerate(value):
        where = f"tools[{k}]"
        if not isinstance(tool, dict):
            raise _fail(f"'{where}' must be an object", where)
        if tool.get("type", "function") != "function":
            raise _fail(f"'{where}.type' must be 'function', got {tool.get('type')!r}", f"{where}.type")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise _fail(f"'{where}.function' must be an object with a name", f"{where}.function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"'{where}.function.name' must be a non-empty string", f"{where}.function.name")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise _fail(f"'{where}.function.description' must be a string", f"{where}.function.description")
        parameters = function.get("parameters")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise _fail(f"'{where}.function.parameters' must be a JSON schema object",
                        f"{where}.function.parameters")
        extra = {k: v for k, v in function.items() if k not in _FUNCTION_FIELDS}
        extra.update({k: v for k, v in tool.items() if k not in _TOOL_FIELDS})
        tools.append(Tool(name=name, description=description, parameters=parameters,
                          extra=without_cache_markers(extra)))
    return tools


def _one_choice(body: Mapping[str, Any]) -> None:
    if (_int(body, "n", 1) or 1) > 1:
        # Every tier and the cache hold one answer per request; n > 1 would silently lose the others.
        raise _fail("'n' must be 1: daari answers with one choice per request (send n requests instead)", "n")


# The range and type checks of the sampling fields, in the order they are reported; run only for the fields
# present (most bodies carry two or three of them).
_SAMPLING_CHECKS: tuple[tuple[str, Callable[[Mapping[str, Any]], object]], ...] = (
    ("top_p", lambda body: _number(body, "top_p", 0, 1)),
    ("presence_penalty", lambda body: _number(body, "presence_penalty", -2, 2)),
    ("frequency_penalty", lambda body: _number(body, "frequency_penalty", -2, 2)),
    ("n", _one_choice),
    ("seed", lambda body: _int(body, "seed", -(2**63))),
    ("logprobs", lambda body: _bool(body, "logprobs")),
    ("top_logprobs", lambda body: _int(body, "top_logprobs", 0, 20)),
    ("parallel_tool_calls", lambda body: _bool(body, "parallel_tool_calls")),
)


def _sampling(body: Mapping[str, Any]) -> dict[str, Any]:
    sampling = {key: body[key] for key in _SAMPLING_KEYS if body.get(key) is not None}
    for key, check in _SAMPLING_CHECKS:
        if key in body:
            check(body)
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise _fail("'stop' must be a string or a list of strings", "stop")
    if stop == []:  # some clients (Zed) always send an empty list: it means no stop sequences
        del sampling["stop"]
    for key in ("logit_bias", "response_format"):
        if key in sampling and not isinstance(sampling[key], dict):
            raise _fail(f"'{key}' must be an object", key)
    choice = body.get("tool_choice")
    if choice is not None and choice not in ("none", "auto", "required") and not (
            isinstance(choice, dict) and isinstance(choice.get("function"), dict)):
        raise _fail("'tool_choice' must be 'none', 'auto', 'required' or "
                    "{\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice")
    if isinstance(choice, dict):
        # The neutral form of a forced tool, shared with Anthropic requests (and so with their L0 keys).
        sampling["tool_choice"] = {"name": choice["function"].get("name")}
    max_tokens = _int(body, "max_tokens", 1)
    max_completion = _int(body, "max_completion_tokens", 1)
    if max_completion is not None or max_tokens is not None:
        sampling["max_tokens"] = max_completion if max_completion is not None else max_tokens
    return sampling


def parse_chat_request(body: object, headers: Mapping[str, str]) -> ChatRequest:
    """Validate an OpenAI chat-completions body; raise `InvalidRequest` naming the first bad field."""
    if not isinstance(body, dict):
        raise _fail("the request body must be a JSON object", "body")
    for legacy in ("functions", "function_call"):
        if body.get(legacy) is not None:
            raise _fail(f"the legacy '{legacy}' field is not supported: use 'tools' and 'tool_choice'",
                        legacy)
    model = body.get("model")
    if model is None:
        model = DEFAULT_MODEL
    if not isinstance(model, str) or not model:
        raise _fail("'model' must be a non-empty string", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _fail("'messages' must be a non-empty list of messages", "messages")
    stream_options = body.get("stream_options")
    if stream_options is not None and not isinstance(stream_options, dict):
        raise _fail("'stream_options' must be an object", "stream_options")
    return ChatRequest(
        messages=[_message(m, i) for i, m in enumerate(messages)],
        model=model,
        protocol="openai",
        stream=bool(_bool(body, "stream")),
        temperature=_number(body, "temperature", 0, 2),
        tools=_tools(body.get("tools")),
        sampling=_sampling(body),
        include_usage=bool((stream_options or {}).get("include_usage")),
        raw=body,
        passthrough_headers=client_headers(headers),
        extra=uninterpreted("openai", body, _INTERPRETED),
        shapes=_shapes(messages),
    )


def _shapes(messages: list[Any]) -> WireShapes:
    """Content part types daari does not know (the messages are already validated)."""
    unknown = [f"content_part:{part.get('type')}" for message in messages
               for part in (message.get("content") if isinstance(message.get("content"), list) else [])
               if isinstance(part, dict) and part.get("type") not in KNOWN_PARTS]
    return WireShapes(unknown=tuple(unknown)) if unknown else WireShapes()


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
