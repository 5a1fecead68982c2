"""The protocol-neutral chat request and completion that every tier works on.

OpenAI and Anthropic requests are parsed into `ChatRequest`; every executor answers with a stream of
events (`daari.protocol.events`) that assemble into a `Completion`, which renders back into either protocol.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls", "stop_sequence", "content_filter"]
Protocol = Literal["openai", "anthropic", "responses"]

# A content part is a small JSON object: {"type": "text", "text": str},
# {"type": "image", "media_type": str, "data": str} (base64) or {"type": "image", "url": str}.
ContentPart = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as the model produced it


@dataclass(slots=True)
class Message:
    role: Role
    content: str | list[ContentPart] | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # role == "tool": which call this answers
    name: str | None = None
    is_error: bool = False  # role == "tool": Anthropic's tool_result is_error

    def text(self) -> str:
        """The message's text, parts joined; non-text parts are left out."""
        content = self.content  # read once: the rules call this ~20 times a request, a str nearly always
        if isinstance(content, str):
            return content
        if content is None:
            return ""
        return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str | None
    parameters: dict[str, Any]  # JSON schema of the arguments
    # Definition fields daari does not model (OpenAI function `strict`, an Anthropic server tool's `type`
    # and settings), minus prompt-cache markers: in the cache key, translated where the other side has them.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WireShapes:
    """What a parser saw in the body that the neutral request does not show (not keyed: the body is).

    `unknown`: item, part, block and role types daari does not know ("input_item:foo", "content_part:bar",
    "block:baz", "role:qux"): a new client shape, so the turn is treated as an agent turn and counted.
    `tool_items`: calls and results of hosted or server tools in the history ("web_search_call",
    "mcp_tool_use"...), which have no neutral tool call: the turn is an agent turn all the same.
    """

    unknown: tuple[str, ...] = ()
    tool_items: tuple[str, ...] = ()


NO_SHAPES = WireShapes()


@dataclass(slots=True)
class ChatRequest:
    """One chat request, whatever protocol it came in.

    `sampling` holds only the sampling parameters the client set, under OpenAI's names (top_p, max_tokens,
    stop, n, seed, tool_choice, response_format, presence_penalty, frequency_penalty, logit_bias, top_k):
    a parameter that is absent is not the same as its default, for the cache key as for the upstream.
    """

    messages: list[Message]
    model: str
    protocol: Protocol = "openai"
    stream: bool = False
    temperature: float | None = None
    tools: list[Tool] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)
    include_usage: bool = False
    # The body as the client sent it: for native pass-through to an upstream of the same protocol.
    raw: dict[str, Any] = field(default_factory=dict)
    # Request headers an upstream of the client's own protocol may need (anthropic-beta, x-api-key ...).
    passthrough_headers: dict[str, str] = field(default_factory=dict)
    # Top-level fields daari does not interpret and that can change the answer (`daari.protocol.key_fields`):
    # in the cache key; an upstream of the client's protocol gets them through `raw`.
    extra: dict[str, Any] = field(default_factory=dict)
    # The client's query string (Claude Code sends `?beta=true`): kept for a same-protocol upstream.
    query_string: str = ""
    shapes: WireShapes = NO_SHAPES


    def for_caller(self, passthrough_headers: dict[str, str], query_string: str) -> ChatRequest:
        """This request as another caller sent it: its own headers and query string over the same parsed body
        (shared, not copied: only for code that reads it, see cache/hit_requests.py)."""
        return ChatRequest(self.messages, self.model, self.protocol, self.stream, self.temperature, self.tools,
                           self.sampling, self.include_usage, self.raw, passthrough_headers, self.extra,
                           query_string, self.shapes)

    @property
    def max_tokens(self) -> int | None:
        value = self.sampling.get("max_tokens")
        return int(value) if value is not None else None

    @property
    def stop(self) -> list[str]:
        value = self.sampling.get("stop")
        if value is None:
            return []
        return [value] if isinstance(value, str) else list(value)


@dataclass(slots=True)
class Usage:
    """Token counts. `prompt_tokens` is the whole prompt: `cached_tokens` (read from the provider's prompt
    cache) and `cache_write_tokens` (written to it, Anthropic's cache_creation) are parts of it, as
    `reasoning_tokens` are part of `completion_tokens`. `native` is an OpenAI upstream's own usage object,
    which an OpenAI client gets unchanged (audio and prediction details included)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    native: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(slots=True)
class Completion:
    """A whole answer: what L0 stores and what renders into either protocol."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    stop_sequence: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    # Mean token log-probability where the executor had logprobs; feeds confidence.
    mean_logprob: float | None = None
    # The upstream's own message, when it answered in the client's protocol (an Anthropic message body:
    # thinking blocks with their signatures, server tool blocks). Replayed to clients of that protocol:
    # an agent loop with extended thinking breaks if a replayed turn loses its thinking block.
    native: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "stop_sequence": self.stop_sequence,
            "usage": {k: v for k, v in dataclasses.asdict(self.usage).items() if v},
            "model": self.model,
            "mean_logprob": self.mean_logprob,
            "native": self.native,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Completion:
        return cls(
            text=data["text"],
            tool_calls=[ToolCall(**c) for c in data["tool_calls"]],
            finish_reason=data["finish_reason"],
            stop_sequence=data.get("stop_sequence"),
            usage=Usage(**data["usage"]),
            model=data.get("model", ""),
            mean_logprob=data.get("mean_logprob"),
            native=data.get("native"),
        )
