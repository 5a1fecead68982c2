"""Responses API tools in the neutral model: function tools as they are, freeform (custom) tools as a function
with one string argument, namespaces flattened; and the way back, from a neutral call to the item a Responses
client expects (`call_shapes`).

- A custom tool (Codex's `apply_patch`) becomes a function whose one argument `input` is the tool's whole
  input; its grammar, if any, is quoted in the description (another model is told it, not held to it).
- A `namespace` tool (Codex's `multi_agent_v1`) groups functions and custom tools: each becomes a neutral
  tool named `<namespace>__<name>` (OpenAI function names allow letters, digits, `_` and `-`), and a call
  to it renders back as the inner name with `"namespace"` set, as the Responses API sends it. The namespace
  `functions` is the default one (Codex's Responses Lite wraps its top-level tools in it, and Codex routes
  a call with or without it alike): its tools keep their own names and their calls render without it.
- Hosted tools (web_search, file_search, code_interpreter, image_generation, mcp...) are an offer only a
  Responses upstream can take up: `split_tools` keeps their definitions apart (`hosted`, keyed as sent),
  and another tier answers without them (`daari.pipeline.hosted_tools`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from daari.errors import InvalidRequest
from daari.protocol.chat import ChatRequest, Tool

TRANSLATABLE_TOOLS = ("function", "custom")
NAMESPACE_SEPARATOR = "__"
DEFAULT_NAMESPACE = "functions"  # Codex: "Namespace used for top-level function and custom tools"
# A freeform tool as a function: the model writes the tool's whole input as one string.
CUSTOM_PARAMETERS: dict[str, Any] = {
    "type": "object", "properties": {"input": {"type": "string", "description": "The tool's input, as free text."}},
    "required": ["input"], "additionalProperties": False,
}


@dataclass(frozen=True)
class CallShape:
    """How a call to a neutral tool renders for a Responses client."""

    kind: Literal["function", "custom"]
    name: str  # the name inside its namespace
    namespace: str | None = None


def _fail(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


def flat_name(name: str, namespace: object) -> str:
    """The neutral name of a (possibly namespaced) tool or call; the default namespace adds nothing."""
    if isinstance(namespace, str) and namespace and namespace != DEFAULT_NAMESPACE:
        return f"{namespace}{NAMESPACE_SEPARATOR}{name}"
    return name


def _name(tool: Mapping[str, Any], where: str) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(f"'{where}.name' must be a non-empty string", f"{where}.name")
    return name


def _custom_description(tool: Mapping[str, Any]) -> str | None:
    description = tool.get("description") if isinstance(tool.get("description"), str) else None
    fmt = tool.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        grammar = f"The input must follow this {fmt.get('syntax') or ''} grammar:\n{fmt['definition']}"
        return f"{description}\n\n{grammar}" if description else grammar
    return description


def _tool(tool: object, where: str, namespace: str | None) -> Tool:
    if not isinstance(tool, dict):
        raise _fail(f"'{where}' must be an object", where)
    kind = tool.get("type")
    scope = {"namespace": namespace} if namespace else {}
    if kind == "function":
        name = _name(tool, where)
        parameters = tool.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise _fail(f"'{where}.parameters' must be a JSON schema object", f"{where}.parameters")
        description = tool.get("description")
        extra = {k: v for k, v in tool.items()
                 if k not in ("type", "name", "description", "parameters") and v is not None}
        return Tool(name=flat_name(name, namespace), description=description if isinstance(description, str)
                    else None, parameters=parameters, extra={**extra, **scope})
    if kind == "custom":
        name = _name(tool, where)
        extra = {k: v for k, v in tool.items() if k not in ("name", "description") and v is not None}
        return Tool(name=flat_name(name, namespace), description=_custom_description(tool),
                    parameters=CUSTOM_PARAMETERS, extra={**extra, **scope})
    allowed = "'function' or 'custom'" if namespace else "a string ('function', 'custom', 'web_search'...)"
    raise _fail(f"'{where}.type' must be {allowed}", f"{where}.type")


@dataclass(frozen=True)
class ToolSet:
    """A list of Responses tools: what any tool-capable tier can be given, and the hosted offers."""

    tools: list[Tool]
    hosted: list[dict[str, Any]]  # hosted tool definitions as sent (web_search, mcp...)


def hosted_name(tool: Mapping[str, Any]) -> str:
    """How a hosted tool is named to users: its type, and its server label or name when it has one."""
    label = tool.get("server_label") or tool.get("name")
    return f"{tool.get('type')}:{label}" if isinstance(label, str) and label else str(tool.get("type"))


def split_tools(value: object, where: str = "tools") -> ToolSet:
    """A `tools` list (top-level, or an `additional_tools` item's) as neutral tools (namespaces flattened) and
    the hosted tools it offers."""
    if value is None:
        return ToolSet([], [])
    if not isinstance(value, list):
        raise _fail(f"'{where}' must be a list", where)
    tools: list[Tool] = []
    hosted: list[dict[str, Any]] = []
    for k, tool in enumerate(value):
        at = f"{where}[{k}]"
        if not isinstance(tool, dict):
            raise _fail(f"'{at}' must be an object", at)
        kind = tool.get("type")
        if kind == "namespace":
            namespace, inner = _name(tool, at), tool.get("tools")
            if not isinstance(inner, list):
                raise _fail(f"'{at}.tools' must be a list of tools", f"{at}.tools")
            tools.extend(_tool(t, f"{at}.tools[{j}]", namespace) for j, t in enumerate(inner))
        elif kind in TRANSLATABLE_TOOLS:
            tools.append(_tool(tool, at, None))
        elif isinstance(kind, str) and kind:
            hosted.append(dict(tool))
        else:
            raise _fail(f"'{at}.type' must be a string ('function', 'custom', 'web_search'...)", f"{at}.type")
    return ToolSet(tools, hosted)


def parse_tools(value: object) -> list[Tool]:
    """A request's translatable `tools` as neutral tools (namespaces flattened; hosted tools left out)."""
    return split_tools(value).tools


def custom_arguments(text: str) -> str:
    """A freeform tool's input as the arguments of its function form."""
    return json.dumps({"input": text}, ensure_ascii=False)


def custom_input(arguments: str) -> str:
    """The freeform input back from a function-form call's arguments (the text itself if not that shape)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value["input"] if isinstance(value, dict) and isinstance(value.get("input"), str) else arguments


def call_shapes(request: ChatRequest) -> dict[str, CallShape]:
    """Neutral tool names whose calls a Responses client expects in another shape: freeform tools (a
    `custom_tool_call`) and namespaced tools (inner name plus `namespace`)."""
    if request.protocol != "responses":
        return {}
    shapes: dict[str, CallShape] = {}
    for tool in request.tools:
        namespace = tool.extra.get("namespace")
        custom = tool.extra.get("type") == "custom"
        scoped = isinstance(namespace, str) and namespace != DEFAULT_NAMESPACE
        if custom or scoped:
            inner = tool.name.removeprefix(f"{namespace}{NAMESPACE_SEPARATOR}") if scoped else tool.name
            shapes[tool.name] = CallShape("custom" if custom else "function", inner,
                                          namespace if scoped and isinstance(namespace, str) else None)
    return shapes
