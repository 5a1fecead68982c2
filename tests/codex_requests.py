"""Codex CLI's requests with its default model, built from the Codex source (codex-rs), for tests.

With a Responses Lite model (Codex's default; `use_responses_lite` in its model catalogue), Codex's request
builder (`ModelClient::build_responses_request`, core/src/client.rs) sends no top-level `tools` and an
empty `instructions`: it prepends to `input` an `additional_tools` item (role developer, an id derived from
the thread and the tools) holding `create_tools_json_for_responses_lite`'s list, and a developer message
with the base instructions. That list wraps the function and freeform tools in the default `functions`
namespace; other tools (web_search, on by default) follow it. In code mode the model sees `exec` (a
freeform JavaScript tool with a lark grammar) and `wait`; `parallel_tool_calls` is false for Lite models.
Calls come back as `custom_tool_call` items named `exec` (Codex routes a call with or without the default
namespace alike), their outputs as `custom_tool_call_output` items whose output is a list of content parts.
"""

from __future__ import annotations

import uuid
from typing import Any

MODEL = "gpt-5.6-sol"  # a Responses Lite model of Codex's catalogue; daari passes the name through
EXEC_GRAMMAR = ("start: pragma_source | plain_source\npragma_source: PRAGMA_LINE NEWLINE SOURCE\n"
                "plain_source: SOURCE\nPRAGMA_LINE: /[ \\t]*\\/\\/ @exec:[^\\r\\n]*/\nNEWLINE: /\\r?\\n/\n"
                "SOURCE: /[\\s\\S]+/")
EXEC = {"type": "custom", "name": "exec",
        "description": "Run JavaScript code to orchestrate/compose tool calls\n- Submit raw JavaScript source.",
        "format": {"type": "grammar", "syntax": "lark", "definition": EXEC_GRAMMAR}}
WAIT = {"type": "function", "name": "wait", "strict": False,
        "description": "Waits on a yielded `exec` cell and returns new output or completion.",
        "parameters": {"type": "object", "properties": {
            "cell_id": {"type": "string", "description": "Identifier of the running exec cell."},
            "yield_time_ms": {"type": "number"}, "max_tokens": {"type": "number"},
            "terminate": {"type": "boolean"}}, "required": ["cell_id"], "additionalProperties": False}}
WEB_SEARCH = {"type": "web_search", "external_web_access": False}
LITE_TOOLS = [{"type": "namespace", "name": "functions", "description": "", "tools": [EXEC, WAIT]}, WEB_SEARCH]
BASE_INSTRUCTIONS = "You are Codex, a coding agent based on GPT-5. You and the user share the same workspace."


def headers(session: str) -> dict[str, str]:
    return {"originator": "codex_exec", "session_id": session, "version": "0.171.0",
            "user-agent": "codex_exec/0.171.0 (Debian 13; x86_64) xterm", "accept": "text/event-stream",
            "x-codex-turn-metadata": '{"turn_id":"t1"}'}


def default_model_request(task: str, session: str | None = None, history: list[dict[str, Any]] | None = None,
                          tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One turn as Codex sends it with its default model: tools only in the additional_tools item."""
    thread = session or str(uuid.uuid4())
    return {
        "model": MODEL,
        "instructions": "",
        "input": [
            {"type": "additional_tools", "id": f"at_{uuid.uuid5(uuid.NAMESPACE_OID, thread)}", "role": "developer",
             "tools": LITE_TOOLS if tools is None else tools},
            {"type": "message", "id": f"msg_{uuid.uuid5(uuid.NAMESPACE_DNS, thread)}", "role": "developer",
             "content": [{"type": "input_text", "text": BASE_INSTRUCTIONS}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "<environment_context>\n  <cwd>/work/demo</cwd>\n"
                                               "</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": task}]},
            *(history or []),
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": thread,
        "client_metadata": {"session_id": thread, "thread_id": thread, "turn_id": str(uuid.uuid4()),
                            "ws_request_header_x_openai_internal_codex_responses_lite": "true"},
    }


def exec_round(call_id: str, script: str, output: str) -> list[dict[str, Any]]:
    """The history items of one `exec` call and its output, as Codex sends them back."""
    return [{"type": "custom_tool_call", "call_id": call_id, "name": "exec", "input": script, "status": "completed"},
            {"type": "custom_tool_call_output", "call_id": call_id,
             "output": [{"type": "input_text", "text": output}]}]
