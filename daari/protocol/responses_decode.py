"""A Responses-speaking upstream's answers as neutral events: a whole `response` body, or its SSE events.

- Text: `response.output_text.delta` (and refusal deltas) -> TextDelta. Tool calls: a `function_call` (or a
  custom tool call) item -> ToolCallStart at its output_index, its argument deltas -> ToolCallDelta; a call
  whose arguments only arrive in `output_item.done` gets them from there. Calls take the neutral model's
  names and shapes (responses_tools.py), as the request's tools did: a namespaced call's name is
  `<namespace>__<name>`, and a freeform call's input streams as its function form, `{"input": "..."}`, so the
  judge checks them against the request's tools like any other call.
- Reasoning deltas keep the idle timeout armed (KeepAlive): a long thinking phase is not a hang.
- `response.completed` / `response.incomplete` -> Finish (incomplete for max_output_tokens is "length");
  `response.failed` and `error` events raise UpstreamError with the upstream's message. A stream that ends
  without a terminal event is truncated (UpstreamError).
"""

from __future__ import annotations

import json
from typing import Any

from daari.errors import UpstreamError, UpstreamOverloaded, UpstreamRateLimited
from daari.protocol.chat import FinishReason, Usage
from daari.protocol.events import Event, Finish, KeepAlive, TextDelta, ToolCallDelta, ToolCallStart
from daari.protocol.responses_tools import custom_arguments, flat_name

CALL_ITEMS = {"function_call": "arguments", "custom_tool_call": "input"}
TERMINAL = ("response.completed", "response.incomplete")
# A freeform call's input, streamed as the function form custom_arguments() gives: opened at the item, each
# piece JSON-escaped, closed at the item's end.
CUSTOM_OPEN, CUSTOM_CLOSE = '{"input": "', '"}'


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _call_name(item: dict[str, Any]) -> str:
    return flat_name(str(item.get("name") or ""), item.get("namespace"))


def _call_kind(item: dict[str, Any]) -> str | None:
    """The item's type when it is a tool call (a type that is not a string, e.g. an object, is no call)."""
    kind = item.get("type")
    return kind if isinstance(kind, str) and kind in CALL_ITEMS else None


def _malformed(what: str) -> UpstreamError:
    return UpstreamError(f"malformed upstream Responses answer: {what}")


def _failure(error: object, fallback: str) -> UpstreamError:
    message = error.get("message") if isinstance(error, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    text = f"upstream error: {message if isinstance(message, str) and message else fallback}"
    if code in ("rate_limit_exceeded", "insufficient_quota"):
        return UpstreamRateLimited(text)
    if code in ("server_is_overloaded", "overloaded"):
        return UpstreamOverloaded(text)
    return UpstreamError(text)


def response_usage(response: dict[str, Any]) -> Usage:
    """A Response object's (or a compaction's) `usage` as daari's Usage (zeros when it has none)."""
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return Usage()
    prompt, completion = usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
    if not isinstance(prompt, int) or not isinstance(completion, int):
        raise _malformed("usage token counts are not integers")
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def _reason(response: dict[str, Any], has_calls: bool) -> FinishReason:
    status = response.get("status")
    if status == "failed":
        raise _failure(response.get("error"), "the response failed")
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return "content_filter" if reason == "content_filter" else "length"
    return "tool_calls" if has_calls else "stop"


def _finish(response: dict[str, Any], has_calls: bool) -> Finish:
    model = response.get("model")
    return Finish(reason=_reason(response, has_calls), usage=response_usage(response),
                  model=model if isinstance(model, str) else "")


def _item_events(index: int, item: dict[str, Any]) -> list[Event]:
    kind = _call_kind(item)
    if item.get("type") == "message":
        texts = [p.get("text") or p.get("refusal") or "" for p in item.get("content") or [] if isinstance(p, dict)]
        text = "".join(t for t in texts if isinstance(t, str))
        return [TextDelta(text)] if text else []
    if kind is not None:
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise _malformed(f"output[{index}] is a {kind} without call_id or name")
        arguments = item.get(CALL_ITEMS[kind]) or ""
        if not isinstance(arguments, str):
            raise _malformed(f"output[{index}].{CALL_ITEMS[kind]} is not a string")
        events: list[Event] = [ToolCallStart(index=index, id=call_id, name=_call_name(item))]
        if kind == "custom_tool_call":
            arguments = custom_arguments(arguments)
        return [*events, ToolCallDelta(index=index, arguments=arguments)] if arguments else events
    return []


def events_from_response(body: object) -> list[Event]:
    """The events of a whole (non-stream) `response` object."""
    if not isinstance(body, dict):
        raise _malformed("the body is not a JSON object")
    if body.get("error") and body.get("status") != "completed":
        raise _failure(body.get("error"), "the response failed")
    output = body.get("output")
    if not isinstance(output, list):
        raise _malformed("output is not a list")
    events: list[Event] = []
    for index, item in enumerate(output):
        if isinstance(item, dict):
            events.extend(_item_events(index, item))
    has_calls = any(isinstance(e, ToolCallStart) for e in events)
    return [*events, _finish(body, has_calls)]


class ResponsesEventDecoder:
    """Turns a Responses stream's events into neutral events, one event at a time."""

    def __init__(self) -> None:
        self.finished = False
        self._calls: dict[int, int] = {}  # output_index -> argument characters streamed so far
        self._custom: set[int] = set()  # output_index of freeform calls still open (CUSTOM_OPEN sent)

    def feed(self, name: str, data: dict[str, Any]) -> list[Event]:
        if name == "error":
            raise _failure(data.get("error") if isinstance(data.get("error"), dict) else data, "stream error")
        if name == "response.failed":
            response = data.get("response")
            raise _failure(response.get("error") if isinstance(response, dict) else None, "the response failed")
        if name in ("response.output_text.delta", "response.refusal.delta"):
            delta = data.get("delta")
            return [TextDelta(delta)] if isinstance(delta, str) and delta else []
        index = data.get("output_index")
        if name == "response.output_item.added":
            item = data.get("item")
            if isinstance(item, dict) and _call_kind(item) and isinstance(index, int):
                self._calls[index] = 0
                events: list[Event] = [ToolCallStart(index=index, id=str(item.get("call_id") or f"call_{index}"),
                                                     name=_call_name(item))]
                if item.get("type") == "custom_tool_call":
                    self._custom.add(index)
                    events.append(ToolCallDelta(index=index, arguments=CUSTOM_OPEN))
                return events
            return []
        if name in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            delta = data.get("delta")
            if not isinstance(index, int) or index not in self._calls or not isinstance(delta, str) or not delta:
                return []
            self._calls[index] += len(delta)
            return [ToolCallDelta(index=index, arguments=_escaped(delta) if index in self._custom else delta)]
        if name == "response.output_item.done":
            return self._item_done(index, data.get("item"))
        if name in TERMINAL:
            response = data.get("response")
            if not isinstance(response, dict):
                raise _malformed(f"{name} without a response object")
            self.finished = True
            return [_finish(response, bool(self._calls))]
        if name.startswith("response.reasoning"):
            return [KeepAlive()]
        return []

    def _item_done(self, index: object, item: object) -> list[Event]:
        """Arguments a server sent only whole, in the done item (none streamed before)."""
        kind = _call_kind(item) if isinstance(item, dict) else None
        if kind is None or not isinstance(item, dict) or not isinstance(index, int):
            return []
        arguments = item.get(CALL_ITEMS[kind])
        if index not in self._calls:  # no added event came: the whole call now
            self._calls[index] = len(arguments) if isinstance(arguments, str) else 0
            return _item_events(index, item)
        custom = index in self._custom
        events: list[Event] = []
        if self._calls[index] == 0 and isinstance(arguments, str) and arguments:
            self._calls[index] = len(arguments)
            events.append(ToolCallDelta(index=index, arguments=_escaped(arguments) if custom else arguments))
        if custom:
            self._custom.discard(index)
            events.append(ToolCallDelta(index=index, arguments=CUSTOM_CLOSE))
        return events
