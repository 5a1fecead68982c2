"""A Claude Code session as it goes over the wire (recorded shape of Claude Code 2.1: the billing block that
changes every request, a long system prompt and tool list marked for caching, adaptive thinking, the session
headers and `metadata.user_id`), played as a client would: each answer's content sent back exactly as received
(thinking blocks and signatures included), tool results answered, the cache breakpoint moved to the newest block.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

WORDS = ("parse", "token", "buffer", "stream", "module", "config", "request", "answer", "session", "cache",
         "upstream", "schema", "handler", "result", "context", "window", "message", "thinking", "tool", "repair")


def filler(seed: int, words: int) -> str:
    """Deterministic prose of `words` words (a system prompt's or a tool description's bulk)."""
    return " ".join(WORDS[(seed * 7 + i * 13) % len(WORDS)] + ("." if i % 11 == 10 else "") for i in range(words))


TOOL_NAMES = ("Bash", "Read", "Edit", "Write", "Grep", "Glob", "TodoWrite", "WebFetch")
TOOLS = [{"name": name, "description": filler(i, 320),
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"},
                                                            "description": {"type": "string"}},
                           "required": ["command"]}} for i, name in enumerate(TOOL_NAMES)]
SYSTEM_PROMPT = "You are Claude Code, Anthropic's official CLI for Claude.\n" + filler(99, 1500)
PROMPTS = [f"Step {i}: look at parser.py and fix what the test says about {WORDS[i]}." for i in range(20)]


class ClaudeCodeSession:
    def __init__(self, session_id: str = "0b6c1f3e-5a2d-4c7e-9f10-2a3b4c5d6e7f", ttl: str | None = None,
                 thinking: bool = True, model: str = "claude-sonnet-4-6") -> None:
        self.session_id = session_id
        self.ttl = ttl
        self.thinking = thinking
        self.model = model
        self.messages: list[dict[str, Any]] = []
        self.requests = 0
        self.prompts = iter(PROMPTS)

    def headers(self) -> dict[str, str]:
        return {"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219,interleaved-thinking",
                "x-app": "cli", "user-agent": "claude-cli/2.1.197 (external, cli)",
                "x-claude-code-session-id": self.session_id, "x-api-key": "sk-ant-test"}

    def body(self) -> dict[str, Any]:
        self.requests += 1
        marker: dict[str, Any] = {"type": "ephemeral", **({"ttl": self.ttl} if self.ttl else {})}
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": 32000, "stream": True,
            "system": [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.197.a{self.requests:02d}; "
                                                f"cc_entrypoint=cli; cch={self.requests * 7919 % 99999:05d};"},
                       {"type": "text", "text": SYSTEM_PROMPT, "cache_control": marker}],
            "tools": TOOLS,
            "messages": _with_breakpoint(self.messages),
            "metadata": {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "",
                                                "session_id": self.session_id})},
        }
        if self.thinking:
            body["thinking"] = {"type": "adaptive"}
        return body

    def next_user_turn(self) -> None:
        """The user's next message, or the tool results the last answer asked for."""
        last = self.messages[-1] if self.messages else None
        calls = [b for b in (last or {}).get("content", []) if isinstance(b, dict) and b.get("type") == "tool_use"]
        if last is not None and last["role"] == "assistant" and calls:
            self.messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c["id"], "content": f"ran {c['input']}: 3 passed"}
                for c in calls]})
        else:
            self.messages.append({"role": "user", "content": [{"type": "text", "text": next(self.prompts)}]})

    def answered(self, content: list[dict[str, Any]]) -> None:
        self.messages.append({"role": "assistant", "content": content})


def _with_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with Claude Code's moving breakpoint on the last block of the last message."""
    out = [dict(m) for m in messages]
    if out:
        content = [dict(b) for b in out[-1]["content"]]
        content[-1]["cache_control"] = {"type": "ephemeral"}
        out[-1]["content"] = content
    return out


def content_from_sse(text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The assistant content blocks and the final message_delta of an Anthropic stream, as a client rebuilds them."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    final: dict[str, Any] = {}
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if ": " in line)
        if "data" not in lines:
            continue
        data = json.loads(lines["data"])
        kind = data.get("type")
        if kind == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif kind == "message_delta":
            final = data
        elif kind == "error":
            raise AssertionError(f"stream error: {data}")
    for index, text_json in partial.items():
        blocks[index]["input"] = json.loads(text_json or "{}")
    return [blocks[i] for i in sorted(blocks)], final


async def play_turn(client: httpx.AsyncClient, session: ClaudeCodeSession,
                    headers: dict[str, str] | None = None) -> httpx.Response:
    """One request of the session through daari; its answer joins the conversation."""
    session.next_user_turn()
    reply = await client.post("/v1/messages?beta=true", json=session.body(),
                              headers={**session.headers(), **(headers or {})}, timeout=60)
    if reply.status_code == 200:
        content, _ = content_from_sse(reply.text)
        session.answered(content)
    return reply
