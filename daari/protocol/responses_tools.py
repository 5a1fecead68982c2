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

from daari.protocol.chat import ChatRequest, Tool
from daari.protocol.responses_schema import NAMESPACE_TOOLS, TOOLS, CustomTool, FunctionTool, NamespaceTool
from daari.protocol.schema import Path, fail, param

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


def flat_name(name: str, namespace: object) -> str:
    """The neutral name of a (possibly namespaced) tool or call; the default namespace adds nothing."""
    if isinstance(namespace, str) and namespace and namespace != DEFAULT_NAMESPACE:
        return f"{namespace}{NAMESPACE_SEPARATOR}{name}"
    return name


def _custom_description(tool: Mapping[str, Any]) -> str | None:
    description = tool.get("description") if isinstance(tool.get("description"), str) else None
    fmt = tool.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        grammar = f"The input must follow this {fmt.get('syntax') or ''} grammar:\n{fmt['definition']}"
        return f"{description}\n\n{grammar}" if description else grammar
    return description


def _tool(checked: FunctionTool | CustomTool, tool: dict[str, Any], namespace: str | None) -> Tool:
    """A function or custom tool (checked, and as sent) as a neutral tool."""
    scope = {"namespace": namespace} if namespace else {}
    if type(checked) is FunctionTool:
        extra = {k: v for k, v in tool.items()
                 if k not in ("type", "name", "description", "parameters") and v is not None}
        return Tool(name=flat_name(checked.name, namespace), description=checked.description,
                    parameters=tool.get("parameters") or {"type": "object", "properties": {}},
                    extra={**extra, **scope})
    extra = {k: v for k, v in tool.items() if k not in ("name", "description") and v is not None}
    return Tool(name=flat_name(checked.name, namespace), description=_custom_description(tool),
                parameters=CUSTOM_PARAMETERS, extra={**extra, **scope})


@dataclass(frozen=True)
class ToolSet:
    """A list of Responses tools: what any tool-capable tier can be given, and the hosted offers."""

    tools: list[Tool]
    hosted: list[dict[str, Any]]  # hosted tool definitions as sent (web_search, mcp...)


def hosted_name(tool: Mapping[str, Any]) -> str:
    """How a hosted tool is named to users: its type, and its server label or name when it has one."""
    label = tool.get("server_label") or tool.get("name")
    return f"{tool.get('type')}:{label}" if isinstance(label, str) and label else str(tool.get("type"))


def split_tools(tools: list[Any], at: Path) -> ToolSet:
    """A `tools` list at `at` (top-level, or an `additional_tools` item's) as neutral tools (namespaces
    flattened) and the hosted tools it offers (kept as sent)."""
    out: list[Tool] = []
    hosted: list[dict[str, Any]] = []
    for index, (tool, checked) in enumerate(zip(tools, TOOLS.check(tools, "openai", at), strict=True)):
        if type(checked) is NamespaceTool:
            where = (*at, index, "tools")
            inner_tools = NAMESPACE_TOOLS.check(checked.tools, "openai", where)
            for j, (inner, read) in enumerate(zip(checked.tools, inner_tools, strict=True)):
                if type(read) not in (FunctionTool, CustomTool):
                    raise fail(f"'{param((*where, j, 'type'), 'openai')}' must be 'function' or 'custom'",
                               (*where, j, "type"), "openai")
                out.append(_tool(read, inner, checked.name))
        elif type(checked) in (FunctionTool, CustomTool):
            out.append(_tool(checked, tool, None))
        else:
            hosted.append(dict(tool))
    return ToolSet(out, hosted)


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
