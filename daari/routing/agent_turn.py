"""ADR-0004: a request is an agent turn when it defines tools, or its history holds tool calls or results.

Also (docs/routing.md, R-C3) when its system prompt defines XML tools (Roo Code, Cline): the same loop, with
the tool protocol in the text instead of a `tools` array. Agent turns are served only by exact L0 hits or by
executing a tier; no semantic or rule tier answers them.
"""

from __future__ import annotations

from daari.protocol.chat import ChatRequest
from daari.routing.client_shapes import is_xml_tools_agent


def is_agent_turn(request: ChatRequest) -> bool:
    return uses_tool_api(request) or is_xml_tools_agent(request)


def uses_tool_api(request: ChatRequest) -> bool:
    """Tools defined, or tool calls or results in the history (what is left once XML tools are ruled out)."""
    return bool(request.tools) or any(m.role == "tool" or m.tool_calls for m in request.messages)


def needs_tool_calls(request: ChatRequest) -> bool:
    """Whether an answer may have to be tool calls: tools are defined and not switched off by tool_choice."""
    return bool(request.tools) and request.sampling.get("tool_choice") != "none"
