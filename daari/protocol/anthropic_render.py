"""Anthropic Messages output: neutral results -> message JSON, SSE events, errors and the models list; and
upstream Anthropic messages and stream events -> neutral events.

Choices:
- `model` in what daari renders is the model the client asked for (the answering tier goes in daari_meta).
- Tool input that is not a JSON object renders as {} (`anthropic_wire.parse_arguments`): Anthropic's
  `input` must be an object. In a stream, tool input pieces go out as they come (input_json_delta).
- Pass-through: a `NativeEvent("anthropic", ...)` switches the stream renderer to writing the upstream's
  own events; from then on neutral text and tool events are ignored (they shadow native ones). The stream's
  message_start is written with its first event: the upstream's own when the answer is native (its usage,
  cache_read_input_tokens and all, is what Claude Code's context meter and cost display read), daari's
  otherwise. The upstream's message_delta and message_stop are held until `finish`, so daari_meta rides in
  the message_delta like in neutral mode; the delta is otherwise the upstream's.
- Decoding upstream usage, prompt tokens are input_tokens plus the cache creation and cache read counts,
  which Anthropic reports apart: the neutral Usage holds the whole prompt.
"""

from __future__ import annotations

from typing import Any

from daari.errors import DaariError, UpstreamError, UpstreamOverloaded, UpstreamRateLimited, UpstreamRejected
from daari.jsonio import dumps, loads
from daari.protocol import sse
from daari.protocol.anthropic_wire import compact_json, parse_arguments
from daari.protocol.chat import ChatRequest, Completion, FinishReason, Usage
from daari.protocol.events import (
    Event,
    Finish,
    KeepAlive,
    NativeEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    split_text,
)
from daari.protocol.tokens import estimate_request_tokens

STOP_REASON_TO_ANTHROPIC: dict[str, str] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
}
STOP_REASON_FROM_ANTHROPIC: dict[str, FinishReason] = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}
# daari's models have no release date, but Anthropic's field is required.
MODEL_CREATED_AT = "1970-01-01T00:00:00Z"


# ---------------------------------------------------------------- neutral -> Anthropic JSON


def render_message(completion: Completion, request: ChatRequest, meta: dict[str, Any], message_id: str,
                   native: dict[str, Any] | None = None) -> dict[str, Any]:
    """A whole Messages response. `native`: an upstream Anthropic body to pass through instead (it keeps
    thinking blocks and server tool results); only its id and model are set to daari's."""
    if native is not None:
        return {**native, "id": message_id, "model": request.model, "daari_meta": meta}
    content: list[dict[str, Any]] = []
    if completion.text:
        content.append({"type": "text", "text": completion.text})
    for call in completion.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name,
                        "input": parse_arguments(call.arguments)})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": content,
        "stop_reason": STOP_REASON_TO_ANTHROPIC.get(completion.finish_reason, "end_turn"),
        "stop_sequence": completion.stop_sequence,
        "usage": anthropic_usage(completion.usage),
        "daari_meta": meta,
    }


def anthropic_usage(usage: Usage) -> dict[str, int]:
    """Anthropic counts cache reads and writes apart from input_tokens; neutral prompt_tokens holds all three."""
    out = {"input_tokens": max(0, usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens),
           "output_tokens": usage.completion_tokens}
    if usage.cached_tokens or usage.cache_write_tokens:
        out["cache_creation_input_tokens"] = usage.cache_write_tokens
        out["cache_read_input_tokens"] = usage.cached_tokens
    return out


def error_body(err: DaariError) -> dict[str, Any]:
    return {"type": "error", "error": {"type": err.anthropic_type, "message": err.message}}


def render_error(err: DaariError) -> tuple[int, dict[str, Any]]:
    return err.anthropic_status, error_body(err)


def render_models(model_ids: list[str]) -> dict[str, Any]:
    return {
        "data": [{"type": "model", "id": m, "display_name": m, "created_at": MODEL_CREATED_AT}
                 for m in model_ids],
        "has_more": False,
        "first_id": model_ids[0] if model_ids else None,
        "last_id": model_ids[-1] if model_ids else None,
    }


# ---------------------------------------------------------------- neutral -> Anthropic SSE


def _event(name: str, data: dict[str, Any]) -> bytes:
    return sse.encode(data, event=name)


_MARK = "\x00daari:delta\x00"  # stands for a delta's text in a frame built once (`_delta_frame`)
_MARK_JSON = dumps(_MARK)


class AnthropicStreamRenderer:
    """Writes one Messages stream: `start()`, then `event(ev)` per event, then `finish(meta)` or `error`."""

    def __init__(self, request: ChatRequest, message_id: str) -> None:
        self.request = request
        self.message_id = message_id
        self._next_index = 0  # the next content block's index
        self._open: str | None = None  # "text" or "tool_use": the block open at index _next_index - 1
        self._tool_blocks: dict[int, int] = {}  # neutral tool index -> content block index
        self._finish: Finish | None = None
        self._native = False
        self._native_delta: dict[str, Any] | None = None
        self._native_input_usage: dict[str, Any] = {}  # the upstream message_start's prompt counts
        self._started = False  # message_start written
        self._native_start = False  # ... and it was the upstream's own
        # Per content block index, the content_block_delta frame of a text or input_json delta around the JSON
        # string it carries: built by `_event` itself (a mark where the string goes), so the bytes stay the same.
        self._frames: dict[tuple[str, int], tuple[bytes, bytes] | None] = {}

    def start(self) -> list[bytes]:
        """Nothing yet: message_start goes out with the first event, so a native answer's can be the upstream's."""
        return []

    def _start(self) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        message: dict[str, Any] = {
            "id": self.message_id, "type": "message", "role": "assistant", "model": self.request.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": estimate_request_tokens(self.request), "output_tokens": 0},
        }
        return [_event("message_start", {"type": "message_start", "message": message}),
                _event("ping", {"type": "ping"})]

    def event(self, ev: Event) -> list[bytes]:
        """The SSE frames of one event. A text or tool-input delta inside its open block (nearly every event of a
        neutral stream) is its frame's bytes around `dumps(text)`; the rest goes through `event_by_shape`, the
        same bytes (tested)."""
        if self._started and not self._native:
            if isinstance(ev, TextDelta) and self._open == "text":
                return self._delta_frame("text_delta", "text", self._next_index - 1, ev.text)
            if isinstance(ev, ToolCallDelta) and ev.index in self._tool_blocks:
                return self._delta_frame("input_json_delta", "partial_json", self._tool_blocks[ev.index],
                                         ev.arguments)
        return self.event_by_shape(ev)

    def _delta_frame(self, kind: str, field: str, index: int, text: str) -> list[bytes]:
        if not text:
            return []
        key = (kind, index)
        if key not in self._frames:
            whole = _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": kind, field: _MARK}})
            parts = whole.split(_MARK_JSON)
            self._frames[key] = (parts[0], parts[1]) if len(parts) == 2 else None
        frame = self._frames[key]
        if frame is None:
            return [_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": kind, field: text}})]
        return [frame[0] + dumps(text) + frame[1]]

    def event_by_shape(self, ev: Event) -> list[bytes]:
        """`event`, each event built as a dict and encoded whole: the renderer of record."""
        if isinstance(ev, NativeEvent) and ev.protocol == "anthropic":
            return self._native_event(ev)
        head = self._start()
        return [*head, *self._neutral_event(ev)]

    def _neutral_event(self, ev: Event) -> list[bytes]:
        if isinstance(ev, NativeEvent):
            return []
        if isinstance(ev, Finish):
            self._finish = ev
            return []
        if self._native:
            return []  # shadowed by the native events already written
        if isinstance(ev, TextDelta):
            return self._text(ev.text)
        if isinstance(ev, ToolCallStart):
            out = self._close()
            index = self._open_block("tool_use")
            self._tool_blocks[ev.index] = index
            block = {"type": "tool_use", "id": ev.id, "name": ev.name, "input": {}}
            return [*out, _event("content_block_start",
                                 {"type": "content_block_start", "index": index, "content_block": block})]
        if isinstance(ev, ToolCallDelta):
            block_index = self._tool_blocks.get(ev.index)
            if block_index is None or not ev.arguments:
                return []
            delta = {"type": "input_json_delta", "partial_json": ev.arguments}
            return [_event("content_block_delta",
                           {"type": "content_block_delta", "index": block_index, "delta": delta})]
        return []

    def finish(self, meta: dict[str, Any]) -> list[bytes]:
        out = [*self._start(), *self._close()]
        if self._native_delta is not None and self._native_start:
            delta = {**self._native_delta, "daari_meta": meta}  # the upstream's, as it sent it
        elif self._native_delta is not None:
            # daari's message_start held an estimate; the upstream's real prompt counts replace it here,
            # as Anthropic's own cumulative message_delta usage does.
            native_usage = {**self._native_input_usage, **(self._native_delta.get("usage") or {})}
            delta = {**self._native_delta, "usage": native_usage, "daari_meta": meta}
        else:
            finish = self._finish or Finish(reason="stop")
            usage: dict[str, int] = {"output_tokens": finish.usage.completion_tokens}
            if finish.usage.prompt_tokens:
                usage = {**anthropic_usage(finish.usage), **usage}
            delta = {
                "type": "message_delta",
                "delta": {"stop_reason": STOP_REASON_TO_ANTHROPIC.get(finish.reason, "end_turn"),
                          "stop_sequence": finish.stop_sequence},
                "usage": usage,
                "daari_meta": meta,
            }
        return [*out, _event("message_delta", delta), _event("message_stop", {"type": "message_stop"})]

    def error(self, err: DaariError, meta: dict[str, Any]) -> list[bytes]:
        return [*self._start(), _event("error", {**error_body(err), "daari_meta": meta})]

    def _text(self, text: str) -> list[bytes]:
        if not text:
            return []
        out: list[bytes] = []
        if self._open != "text":
            out.extend(self._close())
            index = self._open_block("text")
            out.append(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                      "content_block": {"type": "text", "text": ""}}))
        delta = {"type": "text_delta", "text": text}
        out.append(_event("content_block_delta",
                          {"type": "content_block_delta", "index": self._next_index - 1, "delta": delta}))
        return out

    def _open_block(self, kind: str) -> int:
        self._open = kind
        self._next_index += 1
        return self._next_index - 1

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        self._open = None
        return [_event("content_block_stop", {"type": "content_block_stop", "index": self._next_index - 1})]

    def _native_event(self, ev: NativeEvent) -> list[bytes]:
        self._native = True
        if ev.name == "message":
            return [b for name, data in message_to_events(ev.data) for b in self._native_event(
                NativeEvent("anthropic", name, data))]
        if ev.name == "message_start":
            usage = (ev.data.get("message") or {}).get("usage") or {}
            self._native_input_usage = {k: v for k, v in usage.items() if k in _INPUT_USAGE_FIELDS}
            if self._started:
                return []  # daari's message_start went out already
            self._started = self._native_start = True
            return [_event("message_start", ev.data), _event("ping", {"type": "ping"})]
        if ev.name in ("ping", "error"):
            return []  # daari writes its own ping; errors go out through `error()`
        head = self._start()
        if head:
            return [*head, *self._native_event(ev)]
        if ev.name == "message_delta":
            self._native_delta = ev.data
            return []
        if ev.name == "message_stop":
            return []
        return [_event(ev.name, ev.data)]


def message_to_events(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A whole Anthropic message as the stream events that would have built it (for a native body that
    must go out as a stream). Blocks other than text, tool_use and thinking start complete."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {**body, "content": [],
                                                                "stop_reason": None, "stop_sequence": None}}),
    ]
    for index, block in enumerate(body.get("content") or []):
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        # Text, thinking and tool input go out in several deltas, as a live answer streams them.
        if kind == "text":
            start = {**block, "text": ""}
            deltas += [{"type": "text_delta", "text": t} for t in split_text(block.get("text", ""))]
        elif kind == "tool_use":
            start = {**block, "input": {}}
            deltas += [{"type": "input_json_delta", "partial_json": p}
                       for p in split_text(compact_json(block.get("input", {})), pieces=4, min_size=8)]
        elif kind == "thinking":
            start = {**block, "thinking": "", "signature": ""}
            deltas += [{"type": "thinking_delta", "thinking": t} for t in split_text(block.get("thinking", ""))]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        else:
            start = block
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": start}))
        events.extend(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                      for d in deltas)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    usage = body.get("usage") or {}
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": body.get("stop_reason"),
                                               "stop_sequence": body.get("stop_sequence")},
                                     "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def native_message(events: list[Event]) -> dict[str, Any] | None:
    """The Anthropic message an upstream sent, rebuilt from its native events (or taken whole from a
    non-stream answer); None when no Anthropic upstream answered natively."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, list[str]] = {}
    for event in events:
        if not isinstance(event, NativeEvent) or event.protocol != "anthropic":
            continue
        data = event.data
        if event.name == "message":
            return data
        if event.name == "message_start":
            message = {**(data.get("message") or {}), "content": []}
        elif event.name == "content_block_start":
            blocks[data["index"]] = dict(data.get("content_block") or {})
        elif event.name == "content_block_delta" and data.get("index") in blocks:
            block, delta = blocks[data["index"]], data.get("delta") or {}
            kind = delta.get("type")
            if kind == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif kind == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif kind == "signature_delta":
                block["signature"] = delta.get("signature", "")
            elif kind == "input_json_delta":
                partial_json.setdefault(data["index"], []).append(delta.get("partial_json", ""))
            elif kind == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif event.name == "message_delta" and message is not None:
            message.update(data.get("delta") or {})
            message["usage"] = {**(message.get("usage") or {}), **(data.get("usage") or {})}
    if message is None:
        return None
    for index, pieces in partial_json.items():
        blocks[index]["input"] = parse_arguments("".join(pieces))
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


# ---------------------------------------------------------------- upstream Anthropic -> neutral events


def _malformed(what: str) -> UpstreamError:
    return UpstreamError(f"malformed Anthropic upstream response: {what}")


_INPUT_USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _usage(usage: object) -> tuple[int, int]:
    """(prompt, completion) tokens. Anthropic counts cached prompt tokens apart: the prompt is their sum."""
    if not isinstance(usage, dict):
        return 0, 0
    inputs = sum(v for k in _INPUT_USAGE_FIELDS if isinstance(v := usage.get(k), int))
    outputs = usage.get("output_tokens")
    return inputs, (outputs if isinstance(outputs, int) else 0)


def neutral_usage(usage: object) -> Usage:
    """An Anthropic usage object (message_start's merged with message_delta's) as neutral Usage."""
    inputs, outputs = _usage(usage)
    counts = usage if isinstance(usage, dict) else {}

    def count(name: str) -> int:
        value = counts.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return Usage(prompt_tokens=inputs, completion_tokens=outputs, cached_tokens=count("cache_read_input_tokens"),
                 cache_write_tokens=count("cache_creation_input_tokens"))


def events_from_message(body: dict[str, Any]) -> list[Event]:
    """A non-stream upstream Messages response as neutral events, ending with Finish."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        raise _malformed("no content list")
    events: list[Event] = []
    tools = 0
    for block in body["content"]:
        if not isinstance(block, dict):
            raise _malformed("content block is not an object")
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise _malformed("text block without text")
            if block["text"]:
                events.append(TextDelta(block["text"]))
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise _malformed("tool_use block without id or name")
            events.append(ToolCallStart(index=tools, id=call_id, name=name))
            events.append(ToolCallDelta(index=tools, arguments=compact_json(block.get("input") or {})))
            tools += 1
    events.append(Finish(
        reason=STOP_REASON_FROM_ANTHROPIC.get(body.get("stop_reason") or "end_turn", "stop"),
        usage=neutral_usage(body.get("usage")),
        stop_sequence=body.get("stop_sequence"),
        model=body.get("model") or "",
    ))
    return events


def upstream_error(data: object, status: int | None = None,
                   retry_after: float | None = None) -> UpstreamError:
    """An Anthropic error body `{"type":"error","error":{"type","message"}}` (an HTTP error's body, with its
    status, or an `event: error` in a stream, without) as the matching UpstreamError."""
    error = data.get("error") if isinstance(data, dict) else None
    error = error if isinstance(error, dict) else {}
    kind = error.get("type") if isinstance(error.get("type"), str) else None
    message = str(error.get("message") or kind or (f"HTTP {status}" if status else "upstream error"))
    common: dict[str, Any] = {"upstream_status": status}
    if status == 429 or kind == "rate_limit_error":
        return UpstreamRateLimited(f"rate limited: {message}", retryable=True, retry_after=retry_after,
                                   **common)
    if status == 529 or kind == "overloaded_error":
        return UpstreamOverloaded(f"overloaded: {message}", retryable=True, **common)
    if status is None or status >= 500:
        label = f"HTTP {status}" if status else kind or "error event"
        return UpstreamError(f"upstream failed ({label}): {message}", retryable=True, **common)
    return UpstreamRejected(message, status=status, anthropic_type=kind or "invalid_request_error", **common)


class AnthropicEventDecoder:
    """Turns an upstream Messages stream, one SSE event at a time, into neutral events."""

    def __init__(self) -> None:
        self._tools: dict[int, int] = {}  # content block index -> neutral tool index
        self._model = ""
        self._usage: dict[str, Any] = {}  # message_start's usage, updated by message_delta's (cumulative)
        self._stop_reason: FinishReason = "stop"
        self._stop_sequence: str | None = None
        self.finished = False

    def feed(self, name: str, data: dict[str, Any]) -> list[Event]:
        if not isinstance(data, dict):
            raise _malformed(f"{name} event data is not an object")
        kind = name or data.get("type")
        try:
            return self._feed(kind, data)
        except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:  # int('') too
            raise _malformed(f"{kind} event: {exc!r}") from None

    def _feed(self, kind: str | None, data: dict[str, Any]) -> list[Event]:
        if kind == "message_start":
            message = data["message"]
            self._model = message.get("model") or ""
            self._usage = dict(message.get("usage") or {})
            return []
        if kind == "content_block_start":
            return self._block_start(int(data["index"]), data["content_block"])
        if kind == "content_block_delta":
            return self._block_delta(int(data["index"]), data["delta"])
        if kind == "message_delta":
            delta = data["delta"]
            if delta.get("stop_reason"):
                self._stop_reason = STOP_REASON_FROM_ANTHROPIC.get(delta["stop_reason"], "stop")
            self._stop_sequence = delta.get("stop_sequence")
            # message_delta usage is cumulative: its counts, where present, replace message_start's.
            self._usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
            return []
        if kind == "message_stop":
            self.finished = True
            return [Finish(reason=self._stop_reason, usage=neutral_usage(self._usage),
                           stop_sequence=self._stop_sequence, model=self._model)]
        if kind == "error":
            raise upstream_error(data)
        if kind == "ping":
            return [KeepAlive()]
        return []  # content_block_stop, and event types added after this was written

    def _block_start(self, index: int, block: dict[str, Any]) -> list[Event]:
        kind = block["type"]
        if kind == "text":
            return [TextDelta(block["text"])] if block.get("text") else []
        if kind == "tool_use":
            tool_index = len(self._tools)
            self._tools[index] = tool_index
            events: list[Event] = [ToolCallStart(index=tool_index, id=block["id"], name=block["name"])]
            if block.get("input"):
                events.append(ToolCallDelta(index=tool_index, arguments=compact_json(block["input"])))
            return events
        return [KeepAlive()]  # thinking, server tool blocks: only the native stream carries them

    def _block_delta(self, index: int, delta: dict[str, Any]) -> list[Event]:
        kind = delta["type"]
        if kind == "text_delta":
            return [TextDelta(delta["text"])] if delta["text"] else []
        if kind == "input_json_delta" and index in self._tools:
            piece = delta["partial_json"]
            return [ToolCallDelta(index=self._tools[index], arguments=piece)] if piece else []
        return [KeepAlive()]  # thinking and signature deltas: only the native stream carries them


def decode_json(text: str | bytes) -> dict[str, Any]:
    """Upstream JSON that must be an object; anything else is an UpstreamError, never a KeyError. Bytes are an
    SSE event's data as sent (`SSEDecoder.feed_bytes`), parsed as their text would be (`loads_data`)."""
    try:
        value = loads(text) if isinstance(text, str) else sse.loads_data(text)
    except ValueError:
        raise _malformed("invalid JSON") from None
    if not isinstance(value, dict):
        raise _malformed("JSON is not an object")
    return value
