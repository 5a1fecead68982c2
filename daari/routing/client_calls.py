"""The kinds of call a coding agent makes, recognised from headers and payload (docs/routing.md, "Client call
types"), so `routing.client_calls` can send each kind to its own tier.

Signals, from Claude Code 2.1's and Codex's own request code (docs/agents.md lists them):
- background: a quota / connectivity probe (max_tokens <= 4), a side call shaped like a title, topic or summary
  request (routing/client_shapes.py, R-C1), or a Claude Code call without tools (its titles, summaries, bash
  prefix checks and other helpers go out with `tools: []` and thinking disabled, mostly on the small model);
- long_context: Claude Code's 1M-token beta (`anthropic-beta: context-1m-...`), or a prompt estimated above
  `LONG_CONTEXT_TOKENS` (Anthropic's standard window);
- subagent: a Claude Code subagent (`x-claude-code-agent-id`) or a Codex one (`x-openai-subagent`);
- main: a main-loop turn, one that defines tools.
Checked in that order; anything else (a plain chat request, no tools, another client) has no call type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from daari.protocol.chat import ChatRequest
from daari.protocol.tokens import estimate_request_tokens
from daari.routing.client_shapes import is_probe, is_side_call_prompt, system_text

CallType = Literal["main", "subagent", "background", "long_context"]
CALL_TYPES: tuple[CallType, ...] = ("main", "subagent", "background", "long_context")
LONG_CONTEXT_TOKENS = 200_000
LONG_CONTEXT_BETA = "context-1m"
CLAUDE_CODE_APPS = ("cli", "cli-bg", "sdk-cli", "sdk-ts", "sdk-py")


def is_claude_code(headers: Mapping[str, str]) -> bool:
    agent = headers.get("user-agent", "").lower()
    return agent.startswith("claude-cli") or agent.startswith("claude-code") or \
        headers.get("x-app", "") in CLAUDE_CODE_APPS or "x-claude-code-session-id" in headers


def is_side_call(request: ChatRequest) -> bool:
    """R-C1's side-call shape (routing/client_shapes.py), checked on a short system prompt only."""
    if request.tools:
        return False
    return is_side_call_prompt(system_text(request))


def call_type(request: ChatRequest, headers: Mapping[str, str], tokens: int | None = None) -> CallType | None:
    """`tokens`: the request's estimate when the caller has it (the classification's)."""
    claude_code = is_claude_code(headers)
    if is_probe(request) or (claude_code and not request.tools) or is_side_call(request):
        return "background"
    tokens = estimate_request_tokens(request) if tokens is None else tokens
    if LONG_CONTEXT_BETA in headers.get("anthropic-beta", "") or tokens > LONG_CONTEXT_TOKENS:
        return "long_context"
    if headers.get("x-claude-code-agent-id") or headers.get("x-openai-subagent"):
        return "subagent"
    if request.tools and (claude_code or request.protocol in ("anthropic", "responses")):
        return "main"
    return None
