"""A fake Anthropic Messages provider that applies the rules Anthropic documents, so tests prove daari against
them rather than against daari's own idea of them (docs: prompt caching, extended thinking, token counting):

Prompt caching
- The prompt is read as blocks in the order tools -> system -> messages (a string content is one block). Each
  block's cumulative hash covers every byte before it (cache_control left out) and the model: the cache is per
  model. Message blocks also cover the `thinking` parameter (changing it invalidates the message cache).
- A breakpoint is a block with `cache_control`, or the last block when the request has a top-level
  `cache_control` (automatic caching). A hit is the furthest position, at a breakpoint or up to 20 blocks before
  one, whose hash was written by an earlier request and has not expired; reads refresh the entry's lifetime.
- Each breakpoint whose prefix holds at least `min_cache_tokens` is written (5 minutes, or 1 hour for `ttl: "1h"`).
- usage: `cache_read_input_tokens` (up to the hit), `cache_creation_input_tokens` (from the hit to the last
  breakpoint written), `input_tokens` the rest. A first-party provider (`first_party=True`) leaves Claude Code's
  billing block out of the cache (it changes per request); any other provider hashes it like any text.
- `accepts_ttl=False`: a provider that answers 400 to `cache_control.ttl` (as some gateways do).

Extended thinking
- Every thinking block it writes is signed with its own secret (`redacted_thinking` too, in `data`); a thinking
  block in the request whose signature it did not make is a 400 "Invalid `signature` in `thinking` block".
- With thinking on, the last assistant turn of a running tool loop (everything after it tool results) must start
  with a thinking block: otherwise a 400, Anthropic's wording.

Answers: with tools, a user turn (not tool results) gets thinking (when on), a short text and a tool_use of the
first tool; tool results get thinking and a text answer. `grade` answers daari's self-evaluation question.
Tokens are counted by a word-and-punctuation tokenizer (not daari's 4-characters estimate). Streams or JSON.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from daari.routing.confidence import SELF_EVAL_INSTRUCTION
from daari.server.asgi_io import answer_lifespan, read_all

LOOKBACK_BLOCKS = 20
TOKEN = re.compile(r"\w{1,6}|[^\w\s]")
BILLING = "x-anthropic-billing-header:"


def count_tokens(text: str) -> int:
    """A tokenizer of its own: words (in pieces of up to 6 characters) and punctuation marks."""
    return len(TOKEN.findall(text))


def _without_marker(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: _without_marker(v) for k, v in block.items() if k != "cache_control"}
    if isinstance(block, list):
        return [_without_marker(v) for v in block]
    return block


def _block_text(block: Any) -> str:
    return json.dumps(_without_marker(block), ensure_ascii=False)


@dataclass
class Served:
    """What one request got: its status, usage, and whether its prefix extended the previous request's."""

    status: int
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    model: str = ""
    prefix_kept: bool | None = None  # None: no earlier request to compare with


class RulesAnthropic:
    def __init__(self, secret: str, *, first_party: bool = True, accepts_ttl: bool = True,
                 min_cache_tokens: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.secret = secret.encode()
        self.first_party = first_party
        self.accepts_ttl = accepts_ttl
        self.min_cache_tokens = min_cache_tokens
        self.clock = clock
        self.cache: dict[str, tuple[float, float]] = {}  # prefix hash -> (expires at, lifetime)
        self.bodies: list[dict[str, Any]] = []
        self.served: list[Served] = []
        self.counted: list[int] = []
        self.grade = "5"
        self._last_breakpoint_hash: str | None = None
        self._answers = 0

    # ------------------------------------------------------------ the provider's rules

    def sign(self, text: str) -> str:
        return base64.b64encode(hmac.new(self.secret, text.encode(), hashlib.sha256).digest()).decode()

    def _blocks(self, body: dict[str, Any]) -> list[tuple[Any, str]]:
        """(block, section) in cache order; the billing block left out by a first-party provider."""
        blocks: list[tuple[Any, str]] = [(t, "tools") for t in body.get("tools") or []]
        system = body.get("system")
        if isinstance(system, str):
            system = [{"type": "text", "text": system}]
        for block in system or []:
            if self.first_party and str(block.get("text", "")).startswith(BILLING):
                continue
            blocks.append((block, "system"))
        for message in body.get("messages") or []:
            content = message.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for part in parts:
                blocks.append(({"role": message.get("role"), **part}, "messages"))
        return blocks

    def _hashes(self, body: dict[str, Any], blocks: list[tuple[Any, str]]) -> list[str]:
        running = hashlib.sha256(str(body.get("model")).encode())
        thinking = json.dumps(body.get("thinking"), sort_keys=True)
        out: list[str] = []
        for block, section in blocks:
            running.update(_block_text(block).encode())
            if section == "messages":
                final = running.copy()
                final.update(thinking.encode())
                out.append(final.hexdigest())
            else:
                out.append(running.hexdigest())
        return out

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks = self._blocks(body)
        tokens = [count_tokens(_block_text(b)) for b, _ in blocks]
        hashes = self._hashes(body, blocks)
        breakpoints = [i for i, (b, _) in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]
        if "cache_control" in body and blocks:
            breakpoints.append(len(blocks) - 1)
        now = self.clock()
        hit = -1
        for point in breakpoints:
            for position in range(point, max(-1, point - LOOKBACK_BLOCKS), -1):
                entry = self.cache.get(hashes[position])
                if entry is not None and entry[0] >= now:
                    hit = max(hit, position)
                    break
        if hit >= 0:
            expires, lifetime = self.cache[hashes[hit]]
            self.cache[hashes[hit]] = (now + lifetime, lifetime)
        written = hit
        for point in breakpoints:
            if point > hit and sum(tokens[:point + 1]) >= self.min_cache_tokens:
                marker = blocks[point][0].get("cache_control") if "cache_control" in blocks[point][0] else \
                    body.get("cache_control")
                lifetime = 3600.0 if isinstance(marker, dict) and marker.get("ttl") == "1h" else 300.0
                self.cache[hashes[point]] = (now + lifetime, lifetime)
                written = max(written, point)
        if breakpoints:
            last = hashes[max(breakpoints)]
            kept = None if self._last_breakpoint_hash is None else self._last_breakpoint_hash in hashes
            self._prefix_kept = kept
            self._last_breakpoint_hash = last
        else:
            self._prefix_kept = None
        read = sum(tokens[:hit + 1])
        created = sum(tokens[hit + 1:written + 1])
        return {"input_tokens": sum(tokens) - read - created, "cache_creation_input_tokens": created,
                "cache_read_input_tokens": read}

    def refusal(self, body: dict[str, Any]) -> str | None:
        """Why the provider refuses the body (Anthropic's words), or None."""
        if not self.accepts_ttl and "ttl" in json.dumps(body):
            for block, _ in self._blocks(body):
                if isinstance(block, dict) and isinstance(block.get("cache_control"), dict) \
                        and "ttl" in block["cache_control"]:
                    return "system.1.cache_control.ttl: Extra inputs are not permitted"
        messages = body.get("messages") or []
        for index, message in enumerate(messages):
            content = message.get("content")
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            for place, block in enumerate(content):
                if block.get("type") == "thinking" and block.get("signature") != self.sign(block.get("thinking", "")):
                    return f"messages.{index}.content.{place}: Invalid `signature` in `thinking` block"
                if block.get("type") == "redacted_thinking" and block.get("data") != self.sign("redacted"):
                    return f"messages.{index}.content.{place}: Invalid `data` in `redacted_thinking` block"
        thinking = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        loop = _open_loop(messages)
        if thinking and loop is not None:
            first = (messages[loop].get("content") or [{}])[0]
            if isinstance(first, dict) and first.get("type") not in ("thinking", "redacted_thinking"):
                return (f"messages.{loop}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                        f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must start "
                        "with a thinking block.")
        return None

    # ------------------------------------------------------------ HTTP

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        if scope["type"] != "http":
            return
        body = json.loads(await read_all(receive) or b"{}")
        path = scope["path"]
        if path == "/v1/messages/count_tokens":
            count = sum(count_tokens(_block_text(b)) for b, _ in self._blocks(body))
            self.counted.append(count)
            await _json(send, 200, {"input_tokens": count})
            return
        self.bodies.append(body)
        problem = self.refusal(body)
        if problem is not None:
            self.served.append(Served(400, error=problem, model=str(body.get("model"))))
            await _json(send, 400, {"type": "error", "error": {"type": "invalid_request_error", "message": problem}})
            return
        usage = self.usage(body)
        self.served.append(Served(200, usage, model=str(body.get("model")), prefix_kept=self._prefix_kept))
        content, stop = self._answer(body)
        usage["output_tokens"] = sum(count_tokens(json.dumps(b)) for b in content)
        message = {"id": f"msg_{self._answers}", "type": "message", "role": "assistant", "model": body.get("model"),
                   "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if body.get("stream"):
            await _stream(send, message)
        else:
            await _json(send, 200, message)

    def _answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        self._answers += 1
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        text = json.dumps(last.get("content"))
        if SELF_EVAL_INSTRUCTION in text:
            return [{"type": "text", "text": self.grade}], "end_turn"
        content: list[dict[str, Any]] = []
        if (body.get("thinking") or {}).get("type") in ("enabled", "adaptive"):
            thought = f"Thinking about step {self._answers} with {len(messages)} messages."
            content.append({"type": "thinking", "thinking": thought, "signature": self.sign(thought)})
        tools = body.get("tools") or []
        results = isinstance(last.get("content"), list) and any(
            b.get("type") == "tool_result" for b in last["content"] if isinstance(b, dict))
        if tools and not results:
            tool = tools[0]
            required = (tool.get("input_schema") or {}).get("required") or []
            call_id = "toolu_" + hashlib.sha256(self.secret + str(self._answers).encode()).hexdigest()[:20]
            content += [{"type": "text", "text": "Let me look."},
                        {"type": "tool_use", "id": call_id, "name": tool["name"],
                         "input": {name: f"step {self._answers}" for name in required}}]
            return content, "tool_use"
        content.append({"type": "text", "text": f"Done with step {self._answers}: the output looks right."})
        return content, "end_turn"


def _open_loop(messages: list[Any]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "assistant":
            return index
        content = message.get("content")
        if not isinstance(content, list) or not all(b.get("type") == "tool_result" for b in content):
            return None
    return None


async def _json(send: Any, status: int, data: dict[str, Any]) -> None:
    payload = json.dumps(data).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload, "more_body": False})


async def _stream(send: Any, message: dict[str, Any]) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})

    async def event(name: str, data: dict[str, Any]) -> None:
        await send({"type": "http.response.body", "body": f"event: {name}\ndata: {json.dumps(data)}\n\n".encode(),
                    "more_body": True})
        await trio.lowlevel.checkpoint()

    usage = dict(message["usage"])
    output = usage.pop("output_tokens")
    await event("message_start", {"type": "message_start", "message": {
        **message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}})
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "thinking":
            start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]
        elif kind == "text":
            start, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
        else:
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        await event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        for delta in deltas:
            await event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        await event("content_block_stop", {"type": "content_block_stop", "index": index})
    await event("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                                     "stop_sequence": None},
                                  "usage": {"output_tokens": output}})
    await event("message_stop", {"type": "message_stop"})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
