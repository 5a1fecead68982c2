"""Anthropic Messages requests: parse and validate a client body into a neutral `ChatRequest`, count its
tokens, and build an Anthropic upstream body from any neutral request.

Choices (documented here because both directions depend on them):
- Tool-call arguments from a `tool_use` block's `input` are encoded as compact JSON in the model's key order
  (`json.dumps(input, separators=(",", ":"), ensure_ascii=False)`), so the same input always gives the same
  text; the cache key's normalization sorts keys on its own.
- Content made only of text blocks becomes one string (texts joined with "\n"); with images or other
  blocks it stays a list of parts. `thinking` / `redacted_thinking` blocks in assistant history are model
  internals: they are accepted but left out of the neutral messages and travel in `raw`, which is what an
  Anthropic upstream receives. Other block types daari does not model (document, search_result,
  server_tool_use, web_search_tool_result ...) are kept as parts holding the block verbatim.
- Roles: `user` and `assistant` as documented; a `system` entry inside `messages` (Claude Code's
  mid-conversation system messages) becomes a neutral system message at that position; any other role
  string is read as `user` (its content is the client's input either way). An Anthropic upstream gets the
  body unchanged through `raw`; an OpenAI upstream gets a system message at that position.
- Claude Code's first system block (`x-anthropic-billing-header: ...`) is per request: it travels in `raw`
  to an Anthropic upstream but is left out of the neutral system text (and so of every cache key).
- Fields daari does not interpret (context_management, output_config, mcp_servers, future fields) are
  `extra`, in the cache key unless `daari.protocol.key_fields` lists them (metadata, service_tier); tool fields
  beyond name/description/input_schema (a server tool's type and settings, `strict`) are `Tool.extra`.
- Errors use Anthropic's own wording where clients match on it (Claude Code's fallbacks read 400 texts).
- A missing `model` becomes "daari" (as on the OpenAI side); a missing `max_tokens` is an error, as upstream.
  A JSON null for an optional field means the field is absent.
- Client credentials in `passthrough_headers` are `SecretStr`: they print as '***' in any repr or log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from daari.errors import InvalidRequest
from daari.protocol.chat import ChatRequest, ContentPart, Message, Role, Tool, ToolCall, WireShapes
from daari.protocol.key_fields import is_billing_block, uninterpreted, without_cache_markers
from daari.protocol.tokens import estimate_request_tokens

DEFAULT_MODEL = "daari"
DEFAULT_MAX_TOKENS = 4096
ANTHROPIC_MAX_TEMPERATURE = 1.0
# Headers an Anthropic upstream gets from the client (docs/agents.md): they change the upstream's behaviour
# (betas, API version) or its accounting (which app, which session). Never a credential: see _SECRET_HEADERS.
PASSTHROUGH_HEADERS = ("anthropic-beta", "anthropic-version", "anthropic-dangerous-direct-browser-access",
                       "x-app", "user-agent", "x-claude-code-session-id", "x-client-request-id")
_PASSTHROUGH = frozenset(PASSTHROUGH_HEADERS)
_SECRET_HEADERS = frozenset(("x-api-key", "authorization"))
_HISTORY_ONLY_BLOCKS = ("thinking", "redacted_thinking")
# Blocks daari knows; any other type is a new client shape (carried whole, and counted). Server and MCP tool
# blocks (and every `*_tool_result`) are tool calls and results the client's history holds.
KNOWN_BLOCKS = ("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking",
                "search_result", "container_upload")
SERVER_TOOL_BLOCKS = ("server_tool_use", "mcp_tool_use", "mcp_tool_result")
_TOOL_CHOICE_TO_NEUTRAL = {"auto": "auto", "any": "required", "none": "none"}
# OpenAI reasoning_effort <-> Anthropic thinking budget_tokens, both directions (docs/agents.md).
EFFORT_BUDGET = {"low": 1024, "medium": 4096, "high": 16384}
_MIN_THINKING_BUDGET = 1024
_KNOWN_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}
_INTERPRETED = frozenset({"model", "messages", "system", "max_tokens", "stop_sequences", "temperature", "top_p",
                          "top_k", "tool_choice", "thinking", "tools", "stream"})
_TOOL_FIELDS = ("name", "description", "input_schema")


class SecretStr(str):
    """A credential: works as its text (httpx sends it) but never shows in a repr, so logs cannot leak it."""

    def __repr__(self) -> str:
        return "'***'"


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- client body -> neutral


def parse_messages_request(body: object, headers: Mapping[str, str]) -> ChatRequest:
    """Validate an Anthropic Messages body and turn it into a neutral `ChatRequest` (protocol "anthropic")."""
    return _parse(body, headers, require_max_tokens=True)


def parse_count_tokens_request(body: object, headers: Mapping[str, str]) -> ChatRequest:
    """`POST /v1/messages/count_tokens`: the same body as messages, without max_tokens."""
    return _parse(body, headers, require_max_tokens=False)


def count_tokens(body: object, headers: Mapping[str, str]) -> dict[str, int]:
    """daari's own estimate for a count_tokens body (about 4 characters a token)."""
    return {"input_tokens": estimate_request_tokens(parse_count_tokens_request(body, headers))}


def _parse(body: object, headers: Mapping[str, str], *, require_max_tokens: bool) -> ChatRequest:
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    model = body.get("model")
    model = DEFAULT_MODEL if model is None else model
    if not isinstance(model, str):
        raise InvalidRequest("model: expected a string", param="model")
    messages = _system_messages(body.get("system"))
    raw_messages = body.get("messages")
    # Anthropic's own wording for the common refusals (clients and their users know these texts).
    if raw_messages is None:
        raise InvalidRequest("messages: Field required", param="messages")
    if not isinstance(raw_messages, list):
        raise InvalidRequest("messages: Input should be a valid list", param="messages")
    if not raw_messages:
        raise InvalidRequest("messages: at least one message is required", param="messages")
    for index, raw in enumerate(raw_messages):
        messages.extend(_parse_message(raw, f"messages.{index}"))
    stream = body.get("stream")
    stream = False if stream is None else stream
    if not isinstance(stream, bool):
        raise InvalidRequest("stream: expected a boolean", param="stream")
    return ChatRequest(
        messages=messages,
        model=model,
        protocol="anthropic",
        stream=stream,
        temperature=_temperature(body),
        tools=_parse_tools(body.get("tools")),
        sampling=_sampling(body, require_max_tokens),
        raw=body,
        passthrough_headers=passthrough_headers(headers),
        extra=uninterpreted("anthropic", body, _INTERPRETED),
        shapes=_shapes(raw_messages),
    )


def _shapes(raw_messages: list[Any]) -> WireShapes:
    """Roles and block types daari does not know, and server tool blocks (the messages are validated)."""
    unknown: list[str] = []
    tool_items: list[str] = []
    for message in raw_messages:
        role = message.get("role")
        if role not in _KNOWN_ROLES:
            unknown.append(f"role:{role}")
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            kind = block["type"]
            if kind in SERVER_TOOL_BLOCKS or (kind.endswith("_tool_result") and kind != "tool_result"):
                tool_items.append(kind)
            elif kind not in KNOWN_BLOCKS:
                unknown.append(f"block:{kind}")
    return WireShapes(tuple(unknown), tuple(tool_items)) if unknown or tool_items else WireShapes()


def _system_messages(system: object) -> list[Message]:
    if system is None:
        return []
    if isinstance(system, str):
        return [Message(role="system", content=system)] if system else []
    if not isinstance(system, list):
        raise InvalidRequest("system: expected a string or a list of text blocks", param="system")
    texts: list[str] = []
    for index, block in enumerate(system):
        param = f"system.{index}"
        _require_block(block, param)
        if block["type"] == "text" and not is_billing_block(text := _block_text(block, param)):
            texts.append(text)
    return [Message(role="system", content="\n".join(texts))] if texts else []


def _parse_message(raw: object, param: str) -> list[Message]:
    if not isinstance(raw, dict):
        raise InvalidRequest(f"{param}: expected an object", param=param)
    raw_role = raw.get("role")
    if not isinstance(raw_role, str):
        # Anthropic's own wording: clients (Claude Code) recognise role errors by it.
        raise InvalidRequest(f"{param}.role: Input should be 'user' or 'assistant'", param=f"{param}.role")
    # A role daari does not know is the client's input, read as such (docs/agents.md).
    role: Role = _KNOWN_ROLES.get(raw_role, "user")
    content = raw.get("content")
    if isinstance(content, str):
        return [Message(role=role, content=content)]
    if not isinstance(content, list):
        raise InvalidRequest(f"{param}.content: expected a string or a list of content blocks",
                             param=f"{param}.content")
    for index, block in enumerate(content):
        _require_block(block, f"{param}.content.{index}")
    if role == "assistant":
        return [_assistant_message(content, f"{param}.content")]
    if role == "system":
        parts = [_content_part(b, f"{param}.content.{i}") for i, b in enumerate(content)
                 if b["type"] not in _HISTORY_ONLY_BLOCKS]
        return [Message(role="system", content=_simplify(parts))]
    return _user_messages(content, f"{param}.content")


def _require_block(block: object, param: str) -> None:
    if not isinstance(block, dict):
        raise InvalidRequest(f"{param}: expected a content block object", param=param)
    if not isinstance(block.get("type"), str):
        raise InvalidRequest(f"{param}.type: every content block needs a string type", param=f"{param}.type")


def _block_text(block: dict[str, Any], param: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise InvalidRequest(f"{param}.text: expected a string", param=f"{param}.text")
    return text


def _assistant_message(blocks: list[dict[str, Any]], param: str) -> Message:
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    for index, block in enumerate(blocks):
        where = f"{param}.{index}"
        kind = block["type"]
        if kind == "tool_use":
            calls.append(_tool_call(block, where))
        elif kind == "tool_result":
            raise InvalidRequest(f"{where}: tool_result blocks belong in user messages", param=where)
        elif kind not in _HISTORY_ONLY_BLOCKS:
            parts.append(_content_part(block, where))
    return Message(role="assistant", content=_simplify(parts), tool_calls=calls)


def _tool_call(block: dict[str, Any], param: str) -> ToolCall:
    call_id, name = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidRequest(f"{param}.id: tool_use needs a string id", param=f"{param}.id")
    if not isinstance(name, str) or not name:
        raise InvalidRequest(f"{param}.name: tool_use needs a string name", param=f"{param}.name")
    tool_input = block.get("input", {})
    if not isinstance(tool_input, dict):
        raise InvalidRequest(f"{param}.input: expected an object", param=f"{param}.input")
    return ToolCall(id=call_id, name=name, arguments=compact_json(tool_input))


def _user_messages(blocks: list[dict[str, Any]], param: str) -> list[Message]:
    """Tool results first, one tool Message each in order, then one user Message for everything else."""
    results: list[Message] = []
    parts: list[ContentPart] = []
    for index, block in enumerate(blocks):
        where = f"{param}.{index}"
        kind = block["type"]
        if kind == "tool_result":
            results.append(_tool_result(block, where))
        elif kind == "tool_use":
            raise InvalidRequest(f"{where}: tool_use blocks belong in assistant messages", param=where)
        elif kind not in _HISTORY_ONLY_BLOCKS:
            parts.append(_content_part(block, where))
    if parts or not results:
        results.append(Message(role="user", content=_simplify(parts)))
    return results


def _tool_result(block: dict[str, Any], param: str) -> Message:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidRequest(f"{param}.tool_use_id: expected a string", param=f"{param}.tool_use_id")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise InvalidRequest(f"{param}.is_error: expected a boolean", param=f"{param}.is_error")
    content = block.get("content", "")
    if isinstance(content, list):
        parts = []
        for index, inner in enumerate(content):
            _require_block(inner, f"{param}.content.{index}")
            parts.append(_content_part(inner, f"{param}.content.{index}"))
        content = parts
    elif not isinstance(content, str):
        raise InvalidRequest(f"{param}.content: expected a string or a list of content blocks",
                             param=f"{param}.content")
    return Message(role="tool", content=content, tool_call_id=call_id, is_error=is_error)


def _content_part(block: dict[str, Any], param: str) -> ContentPart:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": _block_text(block, param)}
    if kind == "image":
        return _image_part(block, param)
    # A block daari does not model: keep it whole (the key leaves out its cache_control), so it survives.
    return dict(block)


def _image_part(block: dict[str, Any], param: str) -> ContentPart:
    source = block.get("source")
    if not isinstance(source, dict):
        raise InvalidRequest(f"{param}.source: an image needs a source object", param=f"{param}.source")
    kind = source.get("type")
    if kind == "base64":
        media_type, data = source.get("media_type"), source.get("data")
        if not isinstance(media_type, str) or not isinstance(data, str):
            raise InvalidRequest(f"{param}.source: base64 images need string media_type and data",
                                 param=f"{param}.source")
        return {"type": "image", "media_type": media_type, "data": data}
    if kind == "url":
        url = source.get("url")
        if not isinstance(url, str):
            raise InvalidRequest(f"{param}.source.url: expected a string", param=f"{param}.source.url")
        return {"type": "image", "url": url}
    return dict(block)  # file sources and future kinds: carried as is


def _simplify(parts: list[ContentPart]) -> str | list[ContentPart]:
    if all(p.get("type") == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _temperature(body: dict[str, Any]) -> float | None:
    value = body.get("temperature")
    if value is None:
        return None
    if not _is_number(value) or not 0 <= value <= ANTHROPIC_MAX_TEMPERATURE:
        raise InvalidRequest("temperature: expected a number from 0 to 1", param="temperature")
    return float(value)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _sampling(body: dict[str, Any], require_max_tokens: bool) -> dict[str, Any]:
    sampling: dict[str, Any] = {}
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        if require_max_tokens:
            raise InvalidRequest("max_tokens: Field required", param="max_tokens")
    elif not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise InvalidRequest("max_tokens: expected an integer >= 1", param="max_tokens")
    else:
        sampling["max_tokens"] = max_tokens
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise InvalidRequest("stop_sequences: expected a list of strings", param="stop_sequences")
        if stop:
            sampling["stop"] = stop
    top_p = body.get("top_p")
    if top_p is not None:
        if not _is_number(top_p) or not 0 <= top_p <= 1:
            raise InvalidRequest("top_p: expected a number from 0 to 1", param="top_p")
        sampling["top_p"] = top_p
    top_k = body.get("top_k")
    if top_k is not None:
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
            raise InvalidRequest("top_k: expected an integer >= 0", param="top_k")
        sampling["top_k"] = top_k
    if body.get("tool_choice") is not None:
        sampling.update(_tool_choice(body["tool_choice"]))
    thinking = body.get("thinking")
    if thinking is not None:
        if not isinstance(thinking, dict):
            raise InvalidRequest("thinking: expected an object", param="thinking")
        sampling["thinking"] = thinking  # changes the answer, so it belongs in the cache key
    return sampling


def _tool_choice(choice: object) -> dict[str, Any]:
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        raise InvalidRequest("tool_choice: expected an object with a type", param="tool_choice")
    kind = choice["type"]
    out: dict[str, Any] = {}
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest("tool_choice.name: expected the tool's name", param="tool_choice.name")
        out["tool_choice"] = {"name": name}
    elif kind in _TOOL_CHOICE_TO_NEUTRAL:
        out["tool_choice"] = _TOOL_CHOICE_TO_NEUTRAL[kind]
    else:
        raise InvalidRequest(f"tool_choice.type: expected auto, any, tool or none, got {kind!r}",
                             param="tool_choice.type")
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False  # OpenAI's name for the same switch
    return out


def _parse_tools(tools: object) -> list[Tool]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidRequest("tools: expected a list", param="tools")
    parsed: list[Tool] = []
    for index, tool in enumerate(tools):
        param = f"tools.{index}"
        if not isinstance(tool, dict):
            raise InvalidRequest(f"{param}: expected an object", param=param)
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"{param}.name: expected a string", param=f"{param}.name")
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            raise InvalidRequest(f"{param}.description: expected a string", param=f"{param}.description")
        kind = tool.get("type")
        extra = without_cache_markers({k: v for k, v in tool.items() if k not in _TOOL_FIELDS})
        if kind not in (None, "custom"):
            # A server tool (web_search_..., bash_..., text_editor_...): its definition rides in `raw`.
            parsed.append(Tool(name=name, description=description, parameters={}, extra=extra))
            continue
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise InvalidRequest(f"{param}.input_schema: expected a JSON schema object",
                                 param=f"{param}.input_schema")
        parsed.append(Tool(name=name, description=description, parameters=schema, extra=extra))
    return parsed


def passthrough_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted headers an Anthropic client sent, its credentials as `SecretStr`."""
    out: dict[str, str] = {}
    for key, value in headers.items():  # one pass over what the client sent, not over the allowlists
        name = key.lower()
        if name in _PASSTHROUGH:
            out[name] = value
        elif name in _SECRET_HEADERS:
            out[name] = SecretStr(value)
    return out


# ---------------------------------------------------------------- neutral -> upstream body


def to_upstream_body(request: ChatRequest, model: str | None, stream: bool, *,
                     translate_options: bool = False) -> dict[str, Any]:
    """An Anthropic Messages body for `request` (`translate_options`: an OpenAI request's reasoning_effort
    and strict tools are translated too).

    A request that came in as Anthropic is sent as the client wrote it (cache_control, thinking, server
    tools, metadata survive), with only `model` and `stream` replaced. Anything else is translated:
    system messages to `system`, tool messages to tool_result blocks, tool calls to tool_use blocks,
    same-role neighbours merged (Anthropic wants user and assistant to alternate), temperature capped at 1.
    """
    if request.protocol == "anthropic" and request.raw:
        native = dict(request.raw)
        native["model"] = model or native.get("model") or request.model
        native["stream"] = stream
        return native
    body: dict[str, Any] = {"model": model or request.model,
                            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS}
    system = "\n".join(m.text() for m in request.messages if m.role == "system" and m.text())
    if system:
        body["system"] = system
    body["messages"] = _upstream_messages(request.messages)
    if request.temperature is not None:
        body["temperature"] = min(request.temperature, ANTHROPIC_MAX_TEMPERATURE)
    _upstream_sampling(request, body)
    if request.tools:
        body["tools"] = [_upstream_tool(t, translate_options) for t in request.tools]
    if translate_options:
        _translate_effort(request, body)
    body["stream"] = stream
    return body


def _translate_effort(request: ChatRequest, body: dict[str, Any]) -> None:
    """OpenAI's reasoning_effort as a thinking budget (within max_tokens, as Anthropic requires). Thinking
    admits no temperature other than 1 and no top_k, so those are left out then."""
    effort = request.extra.get("reasoning_effort")
    if effort not in EFFORT_BUDGET or "thinking" in body:
        return
    budget = min(EFFORT_BUDGET[effort], body["max_tokens"] - 1)
    if budget < _MIN_THINKING_BUDGET:
        return  # too small an answer budget to think in: answered without thinking
    body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    body.pop("temperature", None)
    body.pop("top_k", None)


def _upstream_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _upstream_blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        content = entry["content"]
        if len(content) == 1 and content[0]["type"] == "text":
            entry["content"] = content[0]["text"]
    return out


def _upstream_blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or "",
                                 "content": _upstream_content(message.content)}
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks = _upstream_content(message.content)
    if isinstance(blocks, str):
        blocks = [{"type": "text", "text": blocks}] if blocks else []
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": parse_arguments(call.arguments)})
    return blocks


def _upstream_content(content: str | list[ContentPart] | None) -> str | list[dict[str, Any]]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):  # Anthropic rejects empty text blocks
                blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image" and "data" in part:
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": part.get("media_type"),
                                                       "data": part["data"]}})
        elif kind == "image" and "url" in part:
            blocks.append({"type": "image", "source": {"type": "url", "url": part["url"]}})
        elif kind in _OPENAI_ONLY_PARTS:
            blocks.append(_openai_part(part))
        else:
            blocks.append(dict(part))  # an Anthropic block kept whole (document, search_result ...)
    return blocks


_OPENAI_ONLY_PARTS = ("file", "input_audio")

# Anthropic's answer to a "system" entry inside messages without the beta. Claude Code recognises it and
# retries without mid-conversation system messages, so a tier that refuses them must say it this way.
SYSTEM_ROLE_REFUSAL = ('Unexpected role "system". The Messages API accepts a top-level `system` parameter, '
                       'not "system" as an input message role.')


def has_mid_conversation_system(request: ChatRequest) -> bool:
    """Whether a system message comes after the first user or assistant message."""
    seen_turn = False
    for message in request.messages:
        if message.role == "system" and seen_turn:
            return True
        seen_turn = seen_turn or message.role != "system"
    return False


def system_role_refusal(request: ChatRequest, upstream_message: str) -> str | None:
    """For an Anthropic client whose mid-conversation system message a translated tier refused (its 4xx
    talks about "system"): the refusal in Anthropic's words, with the upstream's after it; else None."""
    if request.protocol != "anthropic" or "system" not in upstream_message.lower():
        return None
    if not has_mid_conversation_system(request):
        return None
    return f"{SYSTEM_ROLE_REFUSAL} ({upstream_message})"


def _openai_part(part: ContentPart) -> dict[str, Any]:
    """An OpenAI content part for an Anthropic tier: a base64 file becomes a document, the rest a clear 400."""
    file = part.get("file") if part.get("type") == "file" else None
    data = file.get("file_data") if isinstance(file, dict) else None
    if isinstance(data, str) and data.startswith("data:") and ";base64," in data:
        media_type, _, payload = data[5:].partition(";base64,")
        return {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": payload}}
    raise InvalidRequest(f"content part type {part.get('type')!r} has no Anthropic equivalent here: send it to "
                         "an OpenAI-compatible tier, or leave it out", param="messages")


def parse_arguments(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as the object Anthropic's `input` must be: {} when empty or not an object.

    Dropping unparseable arguments is deliberate: Anthropic rejects a non-object `input`, and a half
    JSON text has no faithful object form.
    """
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _upstream_sampling(request: ChatRequest, body: dict[str, Any]) -> None:
    sampling = request.sampling
    if request.stop:
        body["stop_sequences"] = request.stop
    for key in ("top_p", "top_k", "thinking"):
        if sampling.get(key) is not None:
            body[key] = sampling[key]
    choice = _upstream_tool_choice(sampling.get("tool_choice"))
    if sampling.get("parallel_tool_calls") is False and request.tools:
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice is not None:
        body["tool_choice"] = choice


def _upstream_tool_choice(choice: object) -> dict[str, Any] | None:
    if choice is None:
        return None
    if choice == "required":
        return {"type": "any"}
    if choice in ("auto", "none"):
        return {"type": choice}
    if isinstance(choice, dict):
        # Neutral {"name": ...}, or OpenAI's {"type": "function", "function": {"name": ...}}.
        name = choice.get("name") or (choice.get("function") or {}).get("name")
        if isinstance(name, str):
            return {"type": "tool", "name": name}
    return {"type": "auto"}


def _upstream_tool(tool: Tool, translate_options: bool) -> dict[str, Any]:
    schema = tool.parameters or {"type": "object", "properties": {}}
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = schema
    if translate_options and isinstance(tool.extra.get("strict"), bool):
        out["strict"] = tool.extra["strict"]
    return out
