"""Tool-call repair for local tiers: an executor's event stream with tool calls written as text turned into real
tool-call events (local/tool_text.py finds them), so every renderer sends them in the client's protocol
(OpenAI `tool_calls` deltas, Anthropic `tool_use` blocks with `input_json_delta` and `stop_reason: tool_use`).

Which tiers: `tool_repair: auto` (the default) repairs Ollama tiers and OpenAI-compatible tiers on this machine or
a private network (llama.cpp, vLLM, LM Studio...); `on` and `off` decide for any tier. Only requests that define
tools (and do not say `tool_choice: none`) are watched.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import secrets

import httpx

from daari.config import TierConfig
from daari.executors.base import read_done
from daari.local.tool_text import CallPiece, Piece, TextPiece, ToolTextParser
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Emit, Event, Finish, TextDelta, ToolCallDelta, ToolCallStart

LOCAL_HOSTS = frozenset({"localhost", "host.docker.internal"})


@functools.lru_cache(maxsize=64)
def is_local_url(base_url: str | None) -> bool:
    """A base URL on this machine or a private network (where a local model server runs). Cached: an executor
    asks on every request, and parsing the URL was ~5% of a pass-through request's CPU."""
    if not base_url:
        return False
    host = httpx.URL(base_url).host
    if host in LOCAL_HOSTS or host.endswith((".local", ".localhost", ".internal", ".lan")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def repairs_tools(config: TierConfig) -> bool:
    if config.tool_repair != "auto":
        return config.tool_repair == "on"
    return config.executor == "ollama" or (config.executor == "openai" and is_local_url(config.base_url))


def repairing(request: ChatRequest, emit: Emit, enabled: bool) -> Emit:
    """`emit` wrapped with tool-call repair when `enabled` and the request defines tools; else `emit` itself."""
    if not enabled or not request.tools or request.sampling.get("tool_choice") == "none":
        return emit
    return _Repair(request, emit)


class _Repair:
    def __init__(self, request: ChatRequest, emit: Emit) -> None:
        self.parser = ToolTextParser(request.tools)
        self.emit = emit
        self.next_index = 0
        self.native: dict[int, int] = {}  # the upstream's own tool call index -> the index sent on
        self.repaired = 0

    async def __call__(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            pieces = self.parser.feed(event.text)
            whole = len(pieces) == 1 and isinstance(pieces[0], TextPiece) and pieces[0].text == event.text
            await self._send(pieces, event if whole else None)
        elif isinstance(event, ToolCallStart):
            self.native[event.index] = self.next_index
            self.next_index += 1
            await self.emit(dataclasses.replace(event, index=self.native[event.index]))
        elif isinstance(event, ToolCallDelta):
            await self.emit(dataclasses.replace(event, index=self.native.get(event.index, event.index)))
        elif isinstance(event, Finish):
            await self._send(self.parser.close(), None)
            if self.repaired:
                event = dataclasses.replace(event, reason="tool_calls", stop_sequence=None)
            await self.emit(event)
        else:
            await self.emit(event)

    async def flush(self) -> None:
        """An upstream read's events were emitted (`read_done`): what the parser let through goes out now."""
        await read_done(self.emit)

    async def _send(self, pieces: list[Piece], whole: TextDelta | None) -> None:
        for piece in pieces:
            if isinstance(piece, TextPiece):
                if self.repaired and not piece.text.strip():
                    continue  # the newline after a call is not an answer
                await self.emit(whole if whole is not None else TextDelta(piece.text))
            elif isinstance(piece, CallPiece):
                await self._call(piece)

    async def _call(self, piece: CallPiece) -> None:
        index = self.next_index
        self.next_index += 1
        self.repaired += 1
        await self.emit(ToolCallStart(index=index, id=f"call_{secrets.token_hex(12)}", name=piece.name))
        await self.emit(ToolCallDelta(index=index, arguments=piece.arguments))
