"""Anthropic Messages requests: read a client body, checked against its declared schema (`anthropic_schema`),
into a neutral `ChatRequest`, count its tokens, and build an Anthropic upstream body from any neutral request.

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

import msgspec

from daari.errors import InvalidRequest
from daari.protocol import anthropic_schema
from daari.protocol.anthropic_schema import CountTokensBody, MessagesBody
from daari.protocol.chat import NO_SHAPES, ChatRequest, ContentPart, Message, Role, Tool, ToolCall, WireShapes
from daari.protocol.key_fields import is_billing_block, uninterpreted, without_cache_markers
from daari.protocol.schema import Open, Path, check, fail, param
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
# Blocks daari knows (anthropic_schema); any other type is a new client shape (carried whole, and counted).
# Server and MCP tool blocks (and every `*_tool_result`) are tool calls and results the client's history holds.
KNOWN_BLOCKS = frozenset(anthropic_schema.KNOWN_BLOCKS)
SERVER_TOOL_BLOCKS = anthropic_schema.SERVER_TOOL_BLOCKS
HISTORY_ONLY_BLOCKS = anthropic_schema.HISTORY_ONLY_BLOCKS
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


# What json.dumps(value, separators=(",", ":"), ensure_ascii=False) builds on every call, built once: a tool_use's
# input is encoded for every tool call of the history on every request (~40% of the call's cost).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def compact_json(value: Any) -> str:
    return _COMPACT.encode(value)


# ---------------------------------------------------------------- client body -> neutral


def parse_messages_request(body: object, headers: Mapping[str, str]) -> ChatRequest:
    """Check an Anthropic Messages body against its declared schema (`anthropic_schema`) and read it into a
    neutral `ChatRequest` (protocol "anthropic"); raise `InvalidRequest` naming the first bad field."""
    return _parse(body, headers, schema=MessagesBody)


def parse_count_tokens_request(body: object, headers: Mapping[str, str]) -> ChatRequest:
    """`POST /v1/messages/count_tokens`: the same body as messages, without max_tokens."""
    return _parse(body, headers, schema=CountTokensBody)


def count_tokens(body: object, headers: Mapping[str, str]) -> dict[str, int]:
    """daari's own estimate for a count_tokens body (about 4 characters a token)."""
    return {"input_tokens": estimate_request_tokens(parse_count_tokens_request(body, headers))}


def _parse(body: object, headers: Mapping[str, str], *, schema: type[MessagesBody | CountTokensBody]) -> ChatRequest:
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    read = check(body, schema, "anthropic")
    if not read.messages:  # Anthropic's own words (clients and their users know them)
        raise fail("messages: at least one message is required", ("messages",), "anthropic")
    messages = _system_messages(read.system)
    seen = _Seen()
    try:  # the common case, every block of a declared type: one msgspec call for all the messages
        known = msgspec.convert({"v": read.messages}, anthropic_schema.KnownMessages).v
    except msgspec.ValidationError:
        known = None
    for index, sent in enumerate(read.messages):
        at: Path = ("messages", index)
        if known is not None:
            message: anthropic_schema.KnownMessage | anthropic_schema.MessageParam = known[index]
            blocks = message.content
        else:  # one at a time, each block against its role's shapes: a new block type, or the first bad field
            message = check(sent, anthropic_schema.MessageParam, "anthropic", at)
            blocks = message.content if isinstance(message.content, str) else _role_blocks(message.role).check(
                message.content, "anthropic", (*at, "content"))
        messages.extend(_message(message.role, sent["content"], blocks, at, seen))
    return ChatRequest(
        messages=messages,
        model=DEFAULT_MODEL if read.model is None else read.model,
        protocol="anthropic",
        stream=bool(read.stream),
        temperature=read.temperature,
        tools=_tools(read.tools, body["tools"]) if read.tools else [],
        sampling=_sampling(read, body),
        raw=body,
        passthrough_headers=passthrough_headers(headers),
        extra=uninterpreted("anthropic", body, _INTERPRETED),
        shapes=WireShapes(tuple(seen.unknown), tuple(seen.tool_items)) if seen.unknown or seen.tool_items
        else NO_SHAPES,
    )


class _Seen:
    """Roles and block types daari does not know, and server tool blocks: what `ChatRequest.shapes` shows."""

    def __init__(self) -> None:
        self.unknown: list[str] = []
        self.tool_items: list[str] = []

    def block(self, kind: str) -> None:
        """A block type not in KNOWN_BLOCKS (callers check that first: most blocks are known)."""
        if kind in SERVER_TOOL_BLOCKS or (kind.endswith("_tool_result") and kind != "tool_result"):
            self.tool_items.append(kind)
        else:
            self.unknown.append(f"block:{kind}")


def _system_messages(system: str | list[Any] | None) -> list[Message]:
    if system is None:
        return []
    if isinstance(system, str):
        return [Message(role="system", content=system)] if system else []
    checked = anthropic_schema.TOP_SYSTEM_BLOCKS.check(system, "anthropic", ("system",))
    texts = [read.text for read in checked
             if type(read) is anthropic_schema.TextBlock and not is_billing_block(read.text)]
    return [Message(role="system", content="\n".join(texts))] if texts else []


def _role_blocks(role: str) -> Open:
    """The blocks a message of `role` may hold (a role daari does not know: the user's)."""
    return anthropic_schema.BLOCKS[_KNOWN_ROLES.get(role, "user")]


def _message(sent_role: str, content: str | list[dict[str, Any]], checked: str | list[Any], at: Path,
             seen: _Seen) -> list[Message]:
    """One message: `content` as sent, `checked` its blocks as their shapes read them (`schema.Open.check`)."""
    # A role daari does not know is the client's input, read as such (docs/agents.md).
    role: Role = _KNOWN_ROLES.get(sent_role, "user")
    if sent_role not in _KNOWN_ROLES:
        seen.unknown.append(f"role:{sent_role}")
    if isinstance(content, str) or isinstance(checked, str):
        return [Message(role=role, content=content if isinstance(content, str) else "")]
    at = (*at, "content")
    if role == "assistant":
        return [_assistant_message(content, checked, at, seen)]
    if role == "system":
        parts: list[ContentPart] = []
        for index, (block, read) in enumerate(zip(content, checked, strict=True)):
            kind = block["type"]
            if kind not in KNOWN_BLOCKS:
                seen.block(kind)
            if kind not in HISTORY_ONLY_BLOCKS:
                parts.append(_part(block, read, at, index))
        return [Message(role="system", content=_simplify(parts))]
    return _user_messages(content, checked, at, seen)


def _assistant_message(blocks: list[dict[str, Any]], checked: list[Any], at: Path, seen: _Seen) -> Message:
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    for index, (block, read) in enumerate(zip(blocks, checked, strict=True)):
        kind = block["type"]
        if kind not in KNOWN_BLOCKS:
            seen.block(kind)
        if kind in HISTORY_ONLY_BLOCKS:
            continue
        if type(read) is anthropic_schema.ToolUseBlock:
            calls.append(ToolCall(id=read.id, name=read.name, arguments=compact_json(block.get("input", {}))))
        elif kind == "tool_result":
            raise fail(f"{param((*at, index), 'anthropic')}: tool_result blocks belong in user messages",
                       (*at, index), "anthropic")
        else:
            parts.append(_part(block, read, at, index))
    return Message(role="assistant", content=_simplify(parts), tool_calls=calls)


def _user_messages(blocks: list[dict[str, Any]], checked: list[Any], at: Path, seen: _Seen) -> list[Message]:
    """Tool results first, one tool Message each in order, then one user Message for everything else."""
    results: list[Message] = []
    parts: list[ContentPart] = []
    for index, (block, read) in enumerate(zip(blocks, checked, strict=True)):
        kind = block["type"]
        if kind not in KNOWN_BLOCKS:
            seen.block(kind)
        if type(read) is anthropic_schema.ToolResultBlock:
            results.append(_tool_result(read, (*at, index)))
        elif kind == "tool_use":
            raise fail(f"{param((*at, index), 'anthropic')}: tool_use blocks belong in assistant messages",
                       (*at, index), "anthropic")
        elif kind not in HISTORY_ONLY_BLOCKS:
            parts.append(_part(block, read, at, index))
    if parts or not results:
        results.append(Message(role="user", content=_simplify(parts)))
    return results


def _tool_result(read: anthropic_schema.ToolResultBlock, at: Path) -> Message:
    if isinstance(read.content, str):
        content: str | list[ContentPart] = read.content
    else:
        at = (*at, "content")
        checked = anthropic_schema.RESULT_BLOCKS.check(read.content, "anthropic", at)
        content = [_part(block, inner, at, i) for i, (block, inner) in enumerate(zip(read.content, checked,
                                                                                      strict=True))]
    return Message(role="tool", content=content, tool_call_id=read.tool_use_id, is_error=read.is_error)


def _part(block: dict[str, Any], checked: Any, at: Path, index: int) -> ContentPart:
    """A block as a neutral part: text and images read, any other block (`checked` not a shape daari reads)
    kept whole."""
    if type(checked) is anthropic_schema.TextBlock:
        return {"type": "text", "text": checked.text}
    if type(checked) is anthropic_schema.ImageBlock:
        shape = anthropic_schema.SOURCES.get(checked.source.get("type"))
        read = check(block["source"], shape, "anthropic", (*at, index, "source")) if shape is not None else None
        if isinstance(read, anthropic_schema.Base64Source):
            return {"type": "image", "media_type": read.media_type, "data": read.data}
        if isinstance(read, anthropic_schema.UrlSource):
            return {"type": "image", "url": read.url}
    # A block daari does not model (or an image from a file): kept whole (the key leaves out its cache_control).
    return dict(block)


def _simplify(parts: list[ContentPart]) -> str | list[ContentPart]:
    if all(p.get("type") == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


_TOOL_CHOICE_TO_NEUTRAL: dict[type[anthropic_schema.ToolChoiceAuto], str] = {
    anthropic_schema.ToolChoiceAuto: "auto",
    anthropic_schema.ToolChoiceAny: "required",
    anthropic_schema.ToolChoiceNone: "none",
}


def _sampling(read: CountTokensBody, body: dict[str, Any]) -> dict[str, Any]:
    # The values as the client sent them (1 stays 1, not 1.0: the cache key hashes them).
    sampling: dict[str, Any] = {}
    if read.max_tokens is not None:
        sampling["max_tokens"] = body["max_tokens"]
    if read.stop_sequences:
        sampling["stop"] = body["stop_sequences"]
    if read.top_p is not None:
        sampling["top_p"] = body["top_p"]
    if read.top_k is not None:
        sampling["top_k"] = body["top_k"]
    choice = read.tool_choice
    if isinstance(choice, anthropic_schema.ToolChoiceTool):
        sampling["tool_choice"] = {"name": choice.name}
    elif choice is not None:
        sampling["tool_choice"] = _TOOL_CHOICE_TO_NEUTRAL[type(choice)]
    if choice is not None and choice.disable_parallel_tool_use is True:
        sampling["parallel_tool_calls"] = False  # OpenAI's name for the same switch
    if read.thinking is not None:
        sampling["thinking"] = body["thinking"]  # changes the answer, so it belongs in the cache key
    return sampling


def _tools(tools: list[anthropic_schema.ToolParam], sent: list[dict[str, Any]]) -> list[Tool]:
    parsed: list[Tool] = []
    for index, (tool, definition) in enumerate(zip(tools, sent, strict=True)):
        extra = without_cache_markers({k: v for k, v in definition.items() if k not in _TOOL_FIELDS})
        if tool.type not in (None, "custom"):
            # A server tool (web_search_..., bash_..., text_editor_...): its definition rides in `raw`.
            parsed.append(Tool(name=tool.name, description=tool.description, parameters={}, extra=extra))
            continue
        if tool.input_schema is None:
            raise fail(f"tools.{index}.input_schema: Field required (a client tool's JSON schema)",
                       ("tools", index, "input_schema"), "anthropic")
        parsed.append(Tool(name=tool.name, description=tool.description, parameters=definition["input_schema"],
                           extra=extra))
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
