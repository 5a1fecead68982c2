"""Which client sent a request: its family from the User-Agent (no version kept), a library's own header, and,
for a request a library made on an app's behalf, the app's own prompt.

Real values (tests/test_client_families.py has them as a table):
- Claude Code: `claude-cli/2.1.126 (external, cli)` (the Anthropic SDK's User-Agent, overridden by the CLI).
- Codex: `codex_cli_rs/0.46.0 (Ubuntu 24.4.0; x86_64) xterm-256color`; `codex_exec/...`, `codex_vscode/...` by
  originator (codex-rs default_client.rs `get_codex_user_agent`).
- opencode: `opencode/1.15.4 (darwin 25.4.0; arm64) ai-sdk/provider-utils/4.0.23 runtime/bun/1.3.13` (opencode
  sets `User-Agent: opencode/<version>` on its model calls, session/llm.ts; the AI SDK appends its own parts).
- OpenAI Agents SDK: `Agents/Python 0.24.0` (agents/models/openai_responses.py and chatcmpl_helpers.py).
- aider: has no User-Agent of its own. It calls models through litellm, which calls an OpenAI-compatible
  server through the openai SDK's `with_raw_response` (`OpenAI/Python 2.28.0` plus the SDK's
  `X-Stainless-Raw-Response: true`) and Anthropic or Ollama with its own client (`litellm/1.82.3`). Both are
  family `litellm`; `refine_family` then names aider by its prompts (commit, summary, edit modes).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from daari.protocol.chat import ChatRequest

# User-agent substrings (lower-case) -> client family, first match wins.
CLIENT_FAMILIES: tuple[tuple[str, str], ...] = (
    ("claude-cli", "claude-code"),
    ("claude-code", "claude-code"),
    ("codex", "codex"),
    ("opencode/", "opencode"),
    ("aider", "aider"),
    ("agents/python", "openai-agents"),
    ("agents/js", "openai-agents"),
    ("litellm/", "litellm"),
    ("opencode", "opencode"),
    ("continue", "continue"),
    ("cursor", "cursor"),
    ("cline", "cline"),
    ("roo-code", "roo-code"),
    ("goose", "goose"),
    ("openai/python", "openai-python"),
    ("openai/js", "openai-node"),
    ("anthropic/python", "anthropic-python"),
    ("anthropic/js", "anthropic-node"),
    ("ai-sdk/", "ai-sdk"),
    ("ollama", "ollama"),
    ("curl/", "curl"),
    ("python-httpx", "httpx"),
    ("python-requests", "requests"),
    ("mozilla/", "browser"),
)
RAW_RESPONSE_HEADER = "x-stainless-raw-response"  # the openai SDK's `with_raw_response`: how litellm calls it

# The first words of an app's own system prompts, for requests a library sent on its behalf.
APP_PROMPTS: tuple[tuple[str, str], ...] = (
    ("You are an expert software engineer that generates concise, one-line Git commit messages", "aider"),
    ("You are an expert software engineer.\nReview the provided context and diffs", "aider"),
    ("*Briefly* summarize this partial conversation about programming", "aider"),
    ("Act as an expert software developer", "aider"),
    ("Act as an expert code analyst", "aider"),
    ("Act as an expert architect engineer", "aider"),
    ("You are an expert on the AI coding tool called Aider", "aider"),
)
LIBRARY_FAMILIES = ("litellm", "openai-python", "anthropic-python")
APP_PROMPT_SCAN_CHARS = 400  # the app's words open its system prompt (after any model-specific prefix line)


@lru_cache(maxsize=512)  # a client sends the same User-Agent every time: one scan per distinct value
def client_family(user_agent: str | None, raw_response: bool = False) -> str:
    """The kind of client from its User-Agent ("claude-code", "openai-python", "curl", ...; else "other").

    `raw_response`: the request carried `X-Stainless-Raw-Response: true`; from the plain openai SDK that is
    litellm's way of calling it.
    """
    if not user_agent:
        return "unknown"
    agent = user_agent.lower()
    for needle, family in CLIENT_FAMILIES:
        if needle in agent:
            return "litellm" if family == "openai-python" and raw_response else family
    return "other"


def client_of(headers: Mapping[str, str]) -> str:
    """`client_family` from a request's (lower-cased) headers."""
    return client_family(headers.get("user-agent"), headers.get(RAW_RESPONSE_HEADER, "").lower() == "true")


def refine_family(family: str, request: ChatRequest) -> str:
    """A library's request named after the app that sent it, when the app's own prompt says which (aider)."""
    if family not in LIBRARY_FAMILIES:
        return family
    for message in request.messages:
        if message.role != "system":
            continue
        head = message.text()[:APP_PROMPT_SCAN_CHARS]
        for start, app in APP_PROMPTS:
            if start in head:
                return app
        break  # only the first system message is the app's
    return family
