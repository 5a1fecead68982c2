"""Stream events every executor yields, and the two pure functions that join and split them.

`assemble` folds events into a `Completion` (what L0 stores); `replay` splits a stored `Completion` back
into events (what an L0 hit streams), text in several deltas and tool input in several pieces.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from daari.protocol.chat import Completion, FinishReason, ToolCall, Usage


@dataclass(frozen=True)
class TextDelta:
    text: str
    logprob: float | None = None  # summed log-probability of the tokens in `text`, when known
    tokens: int = 0  # how many tokens `text` holds, when known


@dataclass(frozen=True)
class ToolCallStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolCallDelta:
    index: int
    arguments: str  # a piece of the JSON text


@dataclass(frozen=True)
class Finish:
    reason: FinishReason
    usage: Usage = field(default_factory=Usage)
    stop_sequence: str | None = None
    model: str = ""


@dataclass(frozen=True)
class KeepAlive:
    """The upstream is working but has nothing to show yet (reasoning, pings).

    It only tells the idle timeout that the upstream is alive: a long thinking phase is not a hang.
    Renderers and `assemble` ignore it.
    """


@dataclass(frozen=True)
class NativeEvent:
    """An upstream event in the client's own protocol, to pass through untouched (no lossy round trip).

    Executors that pass a native stream through yield it beside the neutral events it stands for; a
    renderer of the same protocol writes the native event and ignores the neutral ones it shadows.
    `raw` is the SSE event as the upstream sent it (its `event:` line and data text), for a renderer that
    passes it on byte for byte; None for a whole body or a stored answer.
    """

    protocol: str
    name: str
    data: dict[str, Any]
    raw: bytes | None = field(default=None, compare=False, repr=False)


Event = TextDelta | ToolCallStart | ToolCallDelta | Finish | NativeEvent | KeepAlive
# Where a producer of events (an executor, a tool-call repairer) pushes each one.
Emit = Callable[[Event], Awaitable[None]]


def assemble(events: Iterable[Event]) -> Completion:
    """Fold a complete event stream into one `Completion`. The stream must end with `Finish`."""
    completion = Completion()
    parts: list[str] = []
    calls: dict[int, list[str]] = {}
    heads: dict[int, ToolCallStart] = {}
    logprob_sum = 0.0
    logprob_tokens = 0
    finished = False
    for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
            if event.logprob is not None and event.tokens:
                logprob_sum += event.logprob
                logprob_tokens += event.tokens
        elif isinstance(event, ToolCallStart):
            heads[event.index] = event
            calls.setdefault(event.index, [])
        elif isinstance(event, ToolCallDelta):
            calls.setdefault(event.index, []).append(event.arguments)
        elif isinstance(event, Finish):
            completion.finish_reason = event.reason
            completion.usage = event.usage
            completion.stop_sequence = event.stop_sequence
            completion.model = event.model
            finished = True
    if not finished:
        raise ValueError("event stream ended without Finish")
    completion.text = "".join(parts)
    completion.tool_calls = [
        ToolCall(id=heads[i].id, name=heads[i].name, arguments="".join(calls.get(i, [])))
        for i in sorted(heads)
    ]
    if logprob_tokens:
        completion.mean_logprob = logprob_sum / logprob_tokens
    return completion


def split_text(text: str, pieces: int = 8, min_size: int = 4) -> list[str]:
    """Split text into up to `pieces` chunks on whitespace boundaries, so a replay streams like a model."""
    if not text:
        return []
    size = max(min_size, -(-len(text) // pieces))
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.find(" ", end)
            end = space + 1 if 0 <= space < end + size else end
        out.append(text[start:end])
        start = end
    return out


def replay(completion: Completion) -> Iterator[Event]:
    """The events that stream a stored `Completion` back: several text deltas, tool input in pieces."""
    for piece in split_text(completion.text):
        yield TextDelta(piece)
    for index, call in enumerate(completion.tool_calls):
        yield ToolCallStart(index=index, id=call.id, name=call.name)
        for piece in split_text(call.arguments, pieces=4, min_size=8):
            yield ToolCallDelta(index=index, arguments=piece)
    yield Finish(
        reason=completion.finish_reason,
        usage=completion.usage,
        stop_sequence=completion.stop_sequence,
        model=completion.model,
    )
