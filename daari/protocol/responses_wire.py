"""OpenAI Responses requests (`POST /v1/responses`): read a client's body, checked against its declared schema
(`responses_schema`), into a `ChatRequest`, say what of it only a Responses upstream can serve, and build the
body a Responses upstream gets from any `ChatRequest`.

Choices made here (docs/agents.md, "OpenAI Responses API"):
- `input` is a string (one user message) or a list of items. `message`, `function_call` and
  `function_call_output` items become neutral messages; `instructions` becomes the first system message.
- `reasoning` items (with their `encrypted_content`) have no neutral form: a Responses upstream gets them
  untouched (the body passes through as the client sent it), another upstream does not get them (a model
  of another provider cannot read them). Their hash is in the cache key.
- Tools: `responses_tools` (function tools as they are, freeform tools as a one-string function,
  namespaces flattened). `custom_tool_call` items become calls with arguments {"input": ...}, their outputs
  tool messages; a namespaced call's name is flattened the same way as its tool's.
- `additional_tools` items (Codex's Responses Lite sends its tools this way, with no top-level `tools`) add
  their tools like top-level ones; the item itself is bookkeeping (its id changes per session) and is not
  keyed, the tools are.
- Hosted tools (web_search, file_search, code_interpreter, image_generation, mcp...) are kept apart from the
  neutral tools (`extra["hosted_tools"]`, keyed as sent): a tier that cannot run them drops them or refuses
  (`daari.pipeline.hosted_tools`). Calls of hosted tools in the history (`web_search_call`...) become a short
  assistant note another model can read (`hosted_note`); their hash stays in the key.
- Items daari knows but cannot translate (`item_reference`, compaction items, local shell and computer
  calls...) and content parts other than text and images can only be served by a Responses upstream:
  `native_only_reason` names the first one, and a tier that would translate answers 400 instead of silently
  dropping it. Item and part types daari does not know at all are recorded in `ChatRequest.shapes`
  (the turn is then an agent turn, and counted).
- `text` and `reasoning` are keyed as sent; translated fields: max_output_tokens -> max_tokens,
  text.format -> response_format, text.verbosity -> verbosity, reasoning.effort -> reasoning_effort,
  a forced {"type": "function", "name"} tool_choice -> the neutral {"name"}.
- `previous_response_id` is resolved by the route before parsing (daari stores responses itself), so a
  parsed request always holds the whole conversation.
- Fields that cannot change the answer (`daari.protocol.key_fields`: store, prompt_cache_key, metadata,
  client_metadata...) stay out of the key; every other field daari does not interpret is keyed as sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec

from daari.jsonio import canonical
from daari.protocol.chat import ChatRequest, ContentPart, Message, Role, Tool, ToolCall, WireShapes
from daari.protocol.key_fields import uninterpreted
from daari.protocol.openai_headers import client_headers
from daari.protocol.openai_wire import DEFAULT_MODEL
from daari.protocol.responses_schema import (
    CALL_OUTPUT_ITEMS,
    DROPPABLE_ITEMS,
    HOSTED_ITEMS,
    ITEMS,
    KNOWN_ITEMS,
    KNOWN_PARTS_ITEMS,
    MESSAGE_ITEMS,
    NATIVE_ITEMS,
    PARTS,
    TEXT_PARTS,
    AdditionalToolsItem,
    CustomToolCallItem,
    FunctionCallItem,
    ImagePart,
    NamedToolChoice,
    RefusalPart,
    ResponsesBody,
)
from daari.protocol.responses_tools import ToolSet, custom_arguments, flat_name, hosted_name, split_tools
from daari.protocol.schema import Path, check, fail

_ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
NEUTRAL_ITEMS = ("message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
                 "additional_tools")
# Content parts daari knows (the rest are a new shape); only text and URL images translate.
KNOWN_PARTS = ("input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text", "input_image",
               "input_file", "input_audio", "input_video")
# Fields this module reads itself; everything else the client sent is in `ChatRequest.extra` (the key).
INTERPRETED = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p",
    "max_output_tokens", "stream", "previous_response_id",
})


def _digest(value: object) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def _image(url: str | None, at: Path) -> ContentPart | None:
    if not url:
        return None  # a file_id image: only the upstream that holds the file can read it
    if url.startswith("data:"):
        head, comma, data = url[5:].partition(",")
        media_type, _, encoding = head.partition(";")
        if not comma or encoding != "base64" or not media_type:
            raise fail("a data: image URL must look like data:<media type>;base64,<data>", (*at, "image_url"),
                       "openai")
        return {"type": "image", "media_type": media_type, "data": data}
    return {"type": "image", "url": url}


def _opaque(part: Mapping[str, Any]) -> ContentPart:
    """A part daari cannot read: kept for the cache key as a content hash (no tier reads it)."""
    return {"type": "opaque", "kind": str(part.get("type")), "sha256": _digest(part)}


def _content(value: str | list[Any], sent: Any, at: Path, unknown: list[str],
             already_checked: bool = False) -> str | list[ContentPart]:
    """Content as a string or parts. `value` holds the parts as sent, or, `already_checked` (KNOWN_ITEMS), as
    their shapes read them; `sent` is the content as sent."""
    if isinstance(value, str):
        return value
    parts: list[ContentPart] = []
    sent_parts, read_parts = (sent, value) if already_checked else (value, PARTS.check(value, "openai", at))
    for j, (part, checked) in enumerate(zip(sent_parts, read_parts, strict=True)):
        if type(checked) in TEXT_PARTS:
            parts.append({"type": "text", "text": checked.text})
        elif type(checked) is RefusalPart:
            parts.append({"type": "text", "text": checked.refusal})
        elif type(checked) is ImagePart and (image := _image(checked.image_url, (*at, j))) is not None:
            parts.append(image)
        else:
            if (kind := part.get("type")) not in KNOWN_PARTS:
                unknown.append(f"content_part:{kind}")
            parts.append(_opaque(part))
    return parts


def hosted_note(item: dict[str, Any]) -> str:
    """A hosted tool's call (with its result, where the item holds one) as a line another model can read."""
    kind = str(item.get("type"))
    fields = {k: v for k, v in item.items() if k not in ("type", "id", "status", "result", "outputs",
                                                           "encrypted_content") and v not in (None, "", [], {})}
    detail = canonical(fields).decode("utf-8", "replace")
    if len(detail) > 2000:  # a note, not a dump: image data and long results stay with the native tier
        detail = detail[:2000] + "..."
    return f"[{kind} {detail}]"


class _Items:
    """Folds input items into neutral messages: consecutive calls join one assistant message."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.opaque: list[dict[str, Any]] = []  # items with no neutral form, for the key
        self.tools: list[Tool] = []  # from additional_tools items
        self.hosted: list[dict[str, Any]] = []  # hosted tools offered by additional_tools items
        self.unknown: list[str] = []  # item and part types daari does not know
        self.tool_items: list[str] = []  # hosted tool calls in the history

    def _assistant(self) -> Message:
        last = self.messages[-1] if self.messages else None
        if last is None or last.role != "assistant":
            last = Message(role="assistant", content=None)
            self.messages.append(last)
        return last

    def add(self, i: int, item: dict[str, Any], checked: Any) -> None:
        """Input item `i`, as sent and as its shape read it (`schema.Open.check`)."""
        at: Path = ("input", i)
        if type(checked) in MESSAGE_ITEMS:
            content = _content(checked.content, item.get("content"), (*at, "content"), self.unknown,
                               type(checked) in KNOWN_PARTS_ITEMS)
            self.messages.append(Message(role=_ROLES[checked.role], content=content))
        elif type(checked) is FunctionCallItem:
            self._assistant().tool_calls.append(ToolCall(id=checked.call_id, arguments=checked.arguments,
                                                         name=flat_name(checked.name, checked.namespace)))
        elif type(checked) is CustomToolCallItem:
            self._assistant().tool_calls.append(ToolCall(id=checked.call_id, arguments=custom_arguments(checked.input),
                                                         name=flat_name(checked.name, checked.namespace)))
        elif type(checked) in CALL_OUTPUT_ITEMS:
            output = "" if checked.output is None else _content(
                checked.output, item.get("output"), (*at, "output"), self.unknown, type(checked) in KNOWN_PARTS_ITEMS)
            self.messages.append(Message(role="tool", content=output, tool_call_id=checked.call_id))
        elif type(checked) is AdditionalToolsItem:
            found = split_tools(checked.tools, (*at, "tools")) if checked.tools else ToolSet([], [])
            self.tools.extend(found.tools)
            self.hosted.extend(found.hosted)
        else:
            # reasoning, item_reference, hosted tool calls...: hashed, in order, for the key.
            kind = item["type"]
            self.opaque.append({"at": len(self.messages), "sha256": _digest(item)})
            if kind in HOSTED_ITEMS:
                self.tool_items.append(kind)
                self.messages.append(Message(role="assistant", content=hosted_note(item)))
            elif kind not in (*DROPPABLE_ITEMS, *NATIVE_ITEMS):
                self.unknown.append(f"input_item:{kind}")


def _merge_tools(*groups: list[Tool]) -> list[Tool]:
    """Tools from `tools` and every additional_tools item, the first definition of a name kept."""
    seen: set[str] = set()
    merged: list[Tool] = []
    for tool in (t for group in groups for t in group):
        if tool.name not in seen:
            seen.add(tool.name)
            merged.append(tool)
    return merged


def _tool_choice(read: ResponsesBody, body: Mapping[str, Any]) -> object:
    choice = read.tool_choice
    if isinstance(choice, NamedToolChoice):
        if choice.type in ("function", "custom") and choice.name is not None:
            return {"name": choice.name}
        return body["tool_choice"]  # a hosted tool or allowed_tools: only a Responses upstream can honour it
    return choice


def _response_format(text: object) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if fmt.get(k) is not None}
        return {"type": "json_schema", "json_schema": schema}
    return {k: v for k, v in fmt.items() if v is not None}


def _sampling(read: ResponsesBody, body: Mapping[str, Any]) -> dict[str, Any]:
    sampling: dict[str, Any] = {}
    if read.top_p is not None:
        sampling["top_p"] = read.top_p
    if read.max_output_tokens is not None:
        sampling["max_tokens"] = read.max_output_tokens
    if (choice := _tool_choice(read, body)) is not None:
        sampling["tool_choice"] = choice
    if read.parallel_tool_calls is not None:
        sampling["parallel_tool_calls"] = read.parallel_tool_calls
    text = body.get("text") if read.text is not None else None
    if (response_format := _response_format(text)) is not None:
        sampling["response_format"] = response_format
    if isinstance(text, dict) and text.get("verbosity") is not None:
        sampling["verbosity"] = text["verbosity"]
    reasoning = body.get("reasoning") if read.reasoning is not None else None
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        sampling["reasoning_effort"] = reasoning["effort"]
    return sampling


def parse_responses_request(body: object, headers: Mapping[str, str]) -> ChatRequest:
    """Check a Responses body against its declared schema (`responses_schema`) and read it into a neutral
    `ChatRequest`; raise `InvalidRequest` naming the first bad field."""
    if not isinstance(body, dict):
        raise fail("the request body must be a JSON object", ("body",), "openai")
    read: ResponsesBody = check(body, ResponsesBody, "openai")
    if read.conversation is not None:
        raise fail("'conversation' (the Conversations API) is not supported by daari: send the history in "
                   "'input', or chain with 'previous_response_id'", ("conversation",), "openai")
    items = _Items()
    if read.instructions:
        items.messages.append(Message(role="system", content=_content(read.instructions, None, ("instructions",),
                                                                      items.unknown)))
    if isinstance(read.input, str):
        items.messages.append(Message(role="user", content=read.input))
    elif read.input is not None:
        try:  # the common case, every item and part of a declared type: one msgspec call for the whole input
            checked: list[Any] = msgspec.convert({"v": read.input}, KNOWN_ITEMS.many).v
        except msgspec.ValidationError:  # item by item: a new type, or the first bad field
            checked = ITEMS.check(read.input, "openai", ("input",))
        for i, (item, read_item) in enumerate(zip(read.input, checked, strict=True)):
            items.add(i, item, read_item)
    if not any(m.role != "system" for m in items.messages) and not items.opaque:
        raise fail("'input' must hold at least one message or item", ("input",), "openai")
    extra = uninterpreted("responses", body, INTERPRETED)
    if items.opaque:
        extra["input_items"] = items.opaque
    top = split_tools(read.tools, ("tools",)) if read.tools else ToolSet([], [])
    if top.hosted or items.hosted:
        extra["hosted_tools"] = [*top.hosted, *items.hosted]
    sampling = _sampling(read, body)
    if "reasoning_effort" in sampling:  # where translations to other protocols look for it (thinking budget)
        extra["reasoning_effort"] = sampling["reasoning_effort"]
    return ChatRequest(
        messages=items.messages,
        model=read.model or DEFAULT_MODEL,
        protocol="responses",
        stream=bool(read.stream),
        temperature=read.temperature,
        tools=_merge_tools(top.tools, items.tools),
        sampling=sampling,
        raw=body,
        passthrough_headers=client_headers(headers),
        extra=extra,
        shapes=WireShapes(tuple(items.unknown), tuple(items.tool_items)),
    )


def hosted_tools(request: ChatRequest) -> list[str]:
    """The hosted tools a Responses request offers (by `hosted_name`), top-level and in additional_tools."""
    offered = request.extra.get("hosted_tools") if request.protocol == "responses" else None
    return [hosted_name(t) for t in offered if isinstance(t, dict)] if isinstance(offered, list) else []


def native_only_reason(request: ChatRequest) -> str | None:
    """Why only a Responses upstream can serve this request (an item or part with no neutral form).

    Hosted tools offered and hosted tool calls in the history are not reasons: another tier answers without
    the offer and reads the calls as notes, unless its `hosted_tools` is `refuse` (`pipeline.hosted_tools`).
    """
    if request.protocol != "responses":
        return None
    if request.raw.get("prompt") is not None:
        return "a stored prompt template ('prompt'), which lives on the provider"
    choice = request.sampling.get("tool_choice")
    if isinstance(choice, dict) and "type" in choice:
        return f"tool_choice type {choice['type']!r}"
    items = request.raw.get("input")
    for item in items if isinstance(items, list) else []:
        kind = (item.get("type") or "message") if isinstance(item, dict) else None
        if kind not in (*NEUTRAL_ITEMS, *DROPPABLE_ITEMS, *HOSTED_ITEMS):
            return f"input item type {kind!r}"
    for message in request.messages:
        for part in message.content if isinstance(message.content, list) else []:
            if part.get("type") == "opaque":
                return f"content part type {part.get('kind')!r}"
    return None


def lossy_translations(request: ChatRequest) -> list[str]:
    """What a translated answer could not honour as a Responses upstream would: reported in daari_meta."""
    if request.protocol != "responses":
        return []
    notes = [f"custom tool {t.name!r}: a function with one string argument; its grammar is not enforced"
             for t in request.tools if t.extra.get("type") == "custom"]
    items = request.raw.get("input")
    kinds = [i.get("type") for i in (items if isinstance(items, list) else []) if isinstance(i, dict)]
    if any(kind in DROPPABLE_ITEMS for kind in kinds):
        notes.append("reasoning items: left out (another provider's model cannot read them)")
    if request.shapes.tool_items:
        kinds_seen = ", ".join(sorted(set(request.shapes.tool_items)))
        notes.append(f"hosted tool calls in the history read as notes: {kinds_seen}")
    return notes


# --- the other direction: a request as a Responses upstream wants it ---------------------------------------

def _part_to_wire(part: ContentPart, role: str) -> dict[str, Any]:
    if part.get("type") == "image":
        url = part.get("url") or f"data:{part.get('media_type')};base64,{part.get('data', '')}"
        return {"type": "input_image", "image_url": url}
    return {"type": "output_text" if role == "assistant" else "input_text", "text": part.get("text", "")}


def _message_items(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id or "", "output": message.text()}]
    items: list[dict[str, Any]] = []
    if message.content:
        content: Any = (message.content if isinstance(message.content, str)
                        else [_part_to_wire(p, message.role) for p in message.content if p.get("type") != "opaque"])
        items.append({"type": "message", "role": message.role, "content": content})
    for call in message.tool_calls:
        items.append({"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments})
    return items


def _tool_choice_to_wire(choice: Any) -> Any:
    if isinstance(choice, dict) and "name" in choice and "type" not in choice:
        return {"type": "function", "name": choice["name"]}
    if isinstance(choice, dict) and choice.get("type") in ("any", "auto", "none"):  # Anthropic's shape
        return {"any": "required", "auto": "auto", "none": "none"}[choice["type"]]
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name"):
        return {"type": "function", "name": choice["name"]}
    return choice


def _format_to_wire(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema" and isinstance(response_format.get("json_schema"), dict):
        return {"type": "json_schema", **response_format["json_schema"]}
    return response_format


def to_responses_body(request: ChatRequest, model: str | None, stream: bool) -> dict[str, Any]:
    """The body for a Responses upstream. A Responses client's own body passes through untouched (custom
    tools, reasoning items and future fields included), with only model and stream set by daari."""
    if request.protocol == "responses" and request.raw:
        body = {k: v for k, v in request.raw.items() if k != "previous_response_id"}
        body["model"] = model or request.model
        body["stream"] = stream
        return body
    items = [item for m in request.messages for item in _message_items(m)]
    out: dict[str, Any] = {"model": model or request.model, "input": items, "stream": stream, "store": False}
    if request.temperature is not None:
        out["temperature"] = request.temperature
    sampling = request.sampling
    if sampling.get("max_tokens") is not None:
        out["max_output_tokens"] = sampling["max_tokens"]
    if sampling.get("top_p") is not None:
        out["top_p"] = sampling["top_p"]
    if request.tools:
        out["tools"] = [{"type": "function", "name": t.name,
                         **({"description": t.description} if t.description else {}),
                         "parameters": t.parameters,
                         **({"strict": t.extra["strict"]} if "strict" in t.extra else {})} for t in request.tools]
        if sampling.get("tool_choice") is not None:
            out["tool_choice"] = _tool_choice_to_wire(sampling["tool_choice"])
        if sampling.get("parallel_tool_calls") is not None:
            out["parallel_tool_calls"] = sampling["parallel_tool_calls"]
    text: dict[str, Any] = {}
    if (fmt := _format_to_wire(sampling.get("response_format"))) is not None:
        text["format"] = fmt
    verbosity = sampling.get("verbosity", request.extra.get("verbosity"))
    if verbosity is not None:
        text["verbosity"] = verbosity
    if text:
        out["text"] = text
    effort = sampling.get("reasoning_effort", request.extra.get("reasoning_effort"))
    if effort is not None:
        out["reasoning"] = {"effort": effort}
    return out
