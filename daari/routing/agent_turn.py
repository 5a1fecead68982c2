"""ADR-0004: a request is an agent turn when it defines tools, or its history holds tool calls or results.

Also (docs/routing.md, R-C3) when its system prompt defines XML tools (Roo Code, Cline): the same loop, with
the tool protocol in the text instead of a `tools` array. Agent turns are served only by exact L0 hits or by
executing a tier; no semantic or rule tier answers them.
"""

from __future__ import annotations

from daari.protocol.chat import ChatRequest
from daari.routing.client_shapes import is_xml_tools_agent


def is_agent_turn(request: ChatRequest) -> bool:
    if request.tools:
        return True
    if any(m.role == "tool" or m.tool_calls for m in request.messages):
        return True
    return is_xml_tools_agent(request)


def needs_tool_calls(request: ChatRequest) -> bool:
    """Whether an answer may have to be tool calls: tools are defined and not switched off by tool_choice."""
    return bool(request.tools) and request.sampling.get("tool_choice") != "none"
