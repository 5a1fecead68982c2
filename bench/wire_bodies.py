"""Real clients' request bodies, for the wire benches: Claude Code (Anthropic Messages), Codex with its
default model (Responses), aider and an OpenAI tool-calling agent (chat completions), and small requests.

Shapes follow what the clients send (tests/test_claude_code_requests.py, tests/codex_requests.py, the golden
prompts GP-21..26 in daari/eval); sizes follow a mid-session turn: Claude Code's ~17 tools with JSON schemas,
a long system prompt with cache_control, tool_use / tool_result rounds and thinking blocks with signatures.
"""

from __future__ import annotations

from typing import Any

from daari.eval.requests import request_body
from daari.eval.routing_eval import DEFAULT_PROMPTS, load_prompts
from tests.codex_requests import default_model_request, exec_round

_PARAGRAPH = ("When you run a non-trivial bash command, explain what it does and why. Prefer the dedicated "
              "tools over shell pipelines; never guess file contents, read them first. ")
_CODE = "def handler(event, context):\n    return {'status': 200, 'body': event['body']}\n"


def _schema(fields: int) -> dict[str, Any]:
    properties = {f"field_{i}": {"type": "string" if i % 3 else "integer",
                                 "description": f"What field {i} means, and when to leave it out."}
                  for i in range(fields)}
    return {"type": "object", "properties": properties, "required": ["field_0"], "additionalProperties": False,
            "$schema": "http://json-schema.org/draft-07/schema#"}


CLAUDE_TOOLS = ["Task", "Bash", "Glob", "Grep", "ExitPlanMode", "Read", "Edit", "MultiEdit", "Write", "NotebookEdit",
                "WebFetch", "TodoWrite", "WebSearch", "BashOutput", "KillShell", "SlashCommand",
                "mcp__ide__getDiagnostics"]


def claude_code_turn(rounds: int = 12) -> dict[str, Any]:
    """A Claude Code turn `rounds` tool rounds into a session (streaming, thinking on, 17 tools)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>\nAs you answer, use this context: the repo is a Python "
                                 "service.\n</system-reminder>"},
        {"type": "text", "text": "find why the handler test fails and fix it"}]}]
    for i in range(rounds):
        messages.append({"role": "assistant", "content": [
            {"type": "thinking", "thinking": f"I should look at file {i}. " * 8, "signature": "EqQBCkYIBxgCKkB" * 20},
            {"type": "text", "text": f"Let me read src/module_{i}.py."},
            {"type": "tool_use", "id": f"toolu_01{i:022d}", "name": "Read",
             "input": {"file_path": f"/repo/src/module_{i}.py", "limit": 200}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_01{i:022d}",
             "content": "".join(f"{n:>6}\u2192{line}\n" for n, line in enumerate(_CODE.splitlines() * 15))}]})
    messages[-1]["content"].append({"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}})
    return {
        "model": "claude-sonnet-4-6", "max_tokens": 32000, "stream": True,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197.abc; "
                                            "cc_entrypoint=cli; cch=a1b2c;"},
                   {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                    "cache_control": {"type": "ephemeral"}},
                   {"type": "text", "text": _PARAGRAPH * 60, "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": name, "description": _PARAGRAPH * 4, "input_schema": _schema(4 + i % 5)}
                  for i, name in enumerate(CLAUDE_TOOLS)],
        "messages": messages,
        "metadata": {"user_id": "user_abc_account_def_session_0123"},
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    }


def claude_code_probe() -> dict[str, Any]:
    """Claude Code's quota probe: one user message, max_tokens 1."""
    return {"model": "claude-haiku-4-5", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}],
            "metadata": {"user_id": "user_abc_account_def_session_0123"}}


def codex_turn(rounds: int = 12) -> dict[str, Any]:
    """Codex with its default (Responses Lite) model, `rounds` exec calls into a task."""
    history = [item for i in range(rounds)
               for item in exec_round(f"call_{i}", f"await tools.shell('cat src/module_{i}.py')", _CODE * 15)]
    return default_model_request("fix the failing handler test", "thread-1", history)


_GOLDEN = {p["id"]: p for p in load_prompts(DEFAULT_PROMPTS)}


def aider_edit() -> dict[str, Any]:
    """aider's SEARCH/REPLACE edit request (GP-21): plain string messages."""
    return request_body(_GOLDEN["GP-21"], 1024)


def chat_agent_turn(rounds: int = 12) -> dict[str, Any]:
    """An OpenAI tool-calling agent (Agents SDK, opencode style) `rounds` tool calls in (GP-25's tools)."""
    body = request_body(_GOLDEN["GP-25"], 4096)
    messages = list(body["messages"])
    for i in range(rounds):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "shell", "arguments": f'{{"command":["cat","src/module_{i}.py"]}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": _CODE * 15})
    messages.append({"role": "user", "content": [{"type": "text", "text": "go on"}]})
    return {**body, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}


def small_chat() -> dict[str, Any]:
    """bench.hit_cpu's request: a system and a user message."""
    return {"model": "gpt-4o-mini", "temperature": 0, "messages": [
        {"role": "system", "content": "You are a helpful coding assistant."},
        {"role": "user", "content": "What does `git rebase -i HEAD~3` do?"}]}


def small_responses() -> dict[str, Any]:
    return {"model": "gpt-5", "instructions": "Be brief.", "input": "What does `git rebase -i HEAD~3` do?"}


# (name, protocol, body): what the parse benches run.
def bodies() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("openai small chat", "openai", small_chat()),
        ("openai aider edit", "openai", aider_edit()),
        ("openai agent turn", "openai", chat_agent_turn()),
        ("anthropic probe", "anthropic", claude_code_probe()),
        ("anthropic claude code", "anthropic", claude_code_turn()),
        ("responses small", "responses", small_responses()),
        ("responses codex", "responses", codex_turn()),
    ]
