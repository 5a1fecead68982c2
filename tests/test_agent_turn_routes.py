"""A request is an agent turn when tools reach the model by any route, or it holds a shape daari does not
know: one row per shape, each body parsed by its protocol's real parser."""

from __future__ import annotations

from typing import Any

import pytest

from daari.errors import InvalidRequest
from daari.protocol.anthropic_wire import parse_messages_request
from daari.protocol.chat import ChatRequest
from daari.protocol.openai_wire import parse_chat_request
from daari.protocol.responses_wire import parse_responses_request
from daari.routing.agent_turn import is_agent_turn, needs_tool_calls, tool_routes
from tests.codex_requests import LITE_TOOLS, default_model_request

FN = {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}
ANTHROPIC_TOOL = {"name": "ls", "input_schema": {"type": "object"}}
RESPONSES_FN = {"type": "function", "name": "ls", "parameters": {"type": "object"}}
USER = {"role": "user", "content": "list the files"}


def chat(**body: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [USER], **body}


def claude(**body: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 64, "messages": [USER], **body}


def resp(**body: Any) -> dict[str, Any]:
    return {"model": "m", "input": "list the files", **body}


PARSERS = {"openai": parse_chat_request, "anthropic": parse_messages_request, "responses": parse_responses_request}

# (protocol, body, tool routes, unknown shapes); every row but the plain ones is an agent turn.
ROWS: dict[str, tuple[str, dict[str, Any], list[str], list[str]]] = {
    "chat: plain": ("openai", chat(), [], []),
    "chat: tools": ("openai", chat(tools=[FN]), ["tools"], []),
    "chat: tool calls and results in history": ("openai", chat(messages=[
        USER, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]),
        ["tool_calls_in_history", "tool_results_in_history"], []),
    "chat: unknown content part": ("openai", chat(messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "input_video", "video_url": "https://x/v.mp4"}]}]),
        [], ["content_part:input_video"]),
    "anthropic: plain": ("anthropic", claude(), [], []),
    "anthropic: tools": ("anthropic", claude(tools=[ANTHROPIC_TOOL]), ["tools"], []),
    "anthropic: MCP servers": ("anthropic", claude(mcp_servers=[
        {"type": "url", "url": "https://mcp.example.com/sse", "name": "docs"}]), ["mcp_servers"], []),
    "anthropic: tool_use and tool_result in history": ("anthropic", claude(messages=[
        USER, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]}]),
        ["tool_calls_in_history", "tool_results_in_history"], []),
    "anthropic: server tool blocks in history": ("anthropic", claude(messages=[
        USER, {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "x"}},
            {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []},
            {"type": "text", "text": "found nothing"}]}, USER]), ["hosted_tool_calls_in_history"], []),
    "anthropic: unknown block": ("anthropic", claude(messages=[{"role": "user", "content": [
        {"type": "text", "text": "hi"}, {"type": "hologram", "data": "..."}]}]), [], ["block:hologram"]),
    "anthropic: unknown role": ("anthropic", claude(messages=[{"role": "critic", "content": "be terse"}, USER]),
                                [], ["role:critic"]),
    "responses: plain": ("responses", resp(), [], []),
    "responses: function tool": ("responses", resp(tools=[RESPONSES_FN]), ["tools"], []),
    "responses: custom (freeform) tool": ("responses", resp(tools=[{"type": "custom", "name": "apply_patch"}]),
                                          ["tools"], []),
    "responses: namespace tool": ("responses", resp(tools=[{"type": "namespace", "name": "multi_agent_v1",
                                                             "tools": [RESPONSES_FN]}]), ["tools"], []),
    "responses: hosted tool only": ("responses", resp(tools=[{"type": "web_search"}]), ["hosted_tools"], []),
    "responses: remote MCP": ("responses", resp(tools=[
        {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com"}]), ["hosted_tools"], []),
    "responses: additional_tools item (Codex default model)": ("responses", default_model_request("add a file"),
                                                               ["tools", "hosted_tools"], []),
    "responses: empty additional_tools item": ("responses", default_model_request("classify this", tools=[]),
                                               [], []),
    "responses: function call and output in history": ("responses", resp(input=[
        USER, {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}]),
        ["tool_calls_in_history", "tool_results_in_history"], []),
    "responses: custom tool call in history": ("responses", resp(input=[
        USER, {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "namespace": "functions",
               "input": "text(1)"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "1"}]}]),
        ["tool_calls_in_history", "tool_results_in_history"], []),
    "responses: hosted tool call in history": ("responses", resp(input=[
        USER, {"type": "web_search_call", "id": "ws_1", "status": "completed",
               "action": {"type": "search", "query": "daari"}}, USER]), ["hosted_tool_calls_in_history"], []),
    "responses: unknown item": ("responses", resp(input=[USER, {"type": "hologram_call", "id": "h1"}]),
                                [], ["input_item:hologram_call"]),
    "responses: unknown content part": ("responses", resp(input=[{"role": "user", "content": [
        {"type": "input_text", "text": "hi"}, {"type": "input_hologram", "data": "..."}]}]),
        [], ["content_part:input_hologram"]),
}


def parse(protocol: str, body: dict[str, Any]) -> ChatRequest:
    return PARSERS[protocol](body, {})


@pytest.mark.parametrize("row", ROWS)
def test_every_route_tools_take_makes_an_agent_turn(row: str) -> None:
    protocol, body, routes, unknown = ROWS[row]
    request = parse(protocol, body)
    assert tool_routes(request) == routes
    assert list(request.shapes.unknown) == unknown
    assert is_agent_turn(request) is bool(routes or unknown)
    if unknown:  # it may define tools daari cannot see: never the embedded model
        assert needs_tool_calls(request)


def test_xml_tools_in_the_system_prompt_are_an_agent_turn() -> None:
    system = ("You are Roo. TOOL USE\n\nYou have access to a set of tools.\n\n# Tools\n\n## read_file\n"
              "Usage:\n<read_file>\n<path>File path here</path>\n</read_file>")
    request = parse("openai", chat(messages=[{"role": "system", "content": system}, USER]))
    assert tool_routes(request) == [] and is_agent_turn(request)


def test_legacy_functions_are_refused_with_a_clear_error() -> None:
    """Legacy `functions` never reach a tier on a guess: a 400 naming the field and its replacement."""
    with pytest.raises(InvalidRequest) as caught:
        parse("openai", chat(functions=[{"name": "ls", "parameters": {"type": "object"}}]))
    assert caught.value.param == "functions" and "tools" in caught.value.message


def test_codex_default_model_tools_are_the_neutral_tools() -> None:
    request = parse("responses", default_model_request("add a file"))
    assert [t.name for t in request.tools] == ["exec", "wait"]  # the default namespace adds no prefix
    assert request.extra["hosted_tools"] == [LITE_TOOLS[1]]
    assert request.tools[0].extra["namespace"] == "functions"


def test_additional_tools_ids_are_not_in_the_cache_key() -> None:
    """The item's id changes with every Codex thread; the tools it holds are the request."""
    from daari.cache.l0_key import l0_key

    one = parse("responses", default_model_request("add a file", "thread-1"))
    other = parse("responses", default_model_request("add a file", "thread-2"))
    changed = parse("responses", default_model_request("add a file", "thread-1", tools=LITE_TOOLS[:1]))
    assert l0_key(one).digest == l0_key(other).digest != l0_key(changed).digest
