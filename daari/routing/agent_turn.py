"""ADR-0004: a request is an agent turn when tools reach the model by any route, or its history holds tool
calls or results; and when it holds a shape daari does not know (an item, part, block or role), which may
be a new way of sending tools: it is never answered from a shortcut tier or the embedded model on a guess.

Also (docs/routing.md, R-C3) when its system prompt defines XML tools (Roo Code, Cline): the same loop, with
the tool protocol in the text instead of a `tools` array. Agent turns are served only by exact L0 hits or by
executing a tier; no rule tier answers them, and L1 only through its agent prefix (never with an unknown
shape).
"""

from __future__ import annotations

from daari.protocol.chat import ChatRequest
from daari.routing.client_shapes import is_xml_tools_agent

# Fields through which tools reach a model without being neutral tools (they stay in `extra`).
_TOOL_FIELDS = {"hosted_tools": "hosted_tools", "functions": "functions", "mcp_servers": "mcp_servers"}


def tool_routes(request: ChatRequest) -> list[str]:
    """How tools reach the model in this request (empty: they do not)."""
    routes: list[str] = []
    if request.tools:
        routes.append("tools")
    routes.extend(route for field, route in _TOOL_FIELDS.items() if request.extra.get(field))
    if any(m.tool_calls for m in request.messages):
        routes.append("tool_calls_in_history")
    if any(m.role == "tool" for m in request.messages):
        routes.append("tool_results_in_history")
    if request.shapes.tool_items:
        routes.append("hosted_tool_calls_in_history")
    return routes


def is_agent_turn(request: ChatRequest) -> bool:
    return uses_tool_api(request) or bool(request.shapes.unknown) or is_xml_tools_agent(request)


def uses_tool_api(request: ChatRequest) -> bool:
    """Tools by any route, or tool calls or results in the history (what is left once XML tools are ruled out):
    `bool(tool_routes(request))`, stopping at the first route found (three steps of every request ask)."""
    if request.tools or request.shapes.tool_items:
        return True
    extra = request.extra
    if extra:
        for field in _TOOL_FIELDS:
            if extra.get(field):
                return True
    for message in request.messages:
        if message.tool_calls or message.role == "tool":
            return True
    return False


def needs_tool_calls(request: ChatRequest) -> bool:
    """Whether an answer may have to be tool calls: tools are defined and not switched off by tool_choice, or
    the request has a shape daari does not know (it may define tools daari cannot see)."""
    return (bool(request.tools) and request.sampling.get("tool_choice") != "none") or bool(request.shapes.unknown)
