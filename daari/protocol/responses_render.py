"""OpenAI Responses output: the `response` object and its items, whole answers, what L0 keeps of a
Responses upstream's answer and how a stored one replays (the SSE stream is `responses_stream`).

- Neutral answers (any tier) become one `message` item (output_text) and one call item per tool call
  (`function_call`, or `custom_tool_call` / namespaced as the request's tool asks: `responses_tools`).
- A Responses upstream's own response passes through (`NativeEvent("responses", ...)`): reasoning items with
  encrypted_content, custom tool calls and anything newer reach the client untouched, with the upstream's
  own id (daari stores it under that id); daari adds `daari_meta` and, when the client chained with
  `previous_response_id` (which daari resolved, so the upstream never saw it), puts that id back. A stored
  one replayed from L0 is a new response: a new id and creation time.
- `model` is the model the client asked for; the answering tier and upstream model are in `daari_meta`.
- The response object carries every field of the Responses schema (the Open Responses specification,
  tests/test_responses_schema.py): the request's settings echoed, OpenAI's defaults where it set none
  (temperature and top_p 1, penalties 0, top_logprobs 0, service_tier "default"), function tools with
  `description` and `strict` present (null when the client left them out: daari enforced nothing more).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from daari.protocol.chat import ChatRequest, Completion, FinishReason, Usage
from daari.protocol.events import (
    Event,
    Finish,
    NativeEvent,
)
from daari.protocol.events import replay as neutral_replay
from daari.protocol.responses_tools import CallShape, call_shapes, custom_input
from daari.protocol.responses_wire import lossy_translations

RESPONSES = "responses"
TERMINAL = ("response.completed", "response.incomplete")
STORED = "stored_response"  # an upstream's response replayed from L0: a new response, so a new id


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


def usage_json(usage: Usage) -> dict[str, Any]:
    details = {"cached_tokens": usage.cached_tokens, "cache_write_tokens": usage.cache_write_tokens}
    return {"input_tokens": usage.prompt_tokens, "input_tokens_details": details,
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.total_tokens}


def _given(raw: dict[str, Any], key: str, default: Any) -> Any:
    """The request's value, or the API's default when it sent none (or null)."""
    value = raw.get(key)
    return default if value is None else value


def echoed_tools(tools: object) -> list[Any]:
    """The request's tools as sent, function tools with every field the schema requires."""
    if not isinstance(tools, list):
        return []
    return [{"description": None, "parameters": None, "strict": None, **tool}
            if isinstance(tool, dict) and tool.get("type") == "function" else tool for tool in tools]


def response_object(request: ChatRequest, response_id: str, created_at: int, status: str,
                    output: list[dict[str, Any]], usage: dict[str, Any] | None,
                    completed_at: int | None = None) -> dict[str, Any]:
    """The `response` object around `output`, echoing the request's settings as OpenAI does."""
    raw = request.raw
    reasoning: dict[str, Any] = raw["reasoning"] if isinstance(raw.get("reasoning"), dict) else {}
    text: dict[str, Any] = raw["text"] if isinstance(raw.get("text"), dict) else {}
    return {
        "id": response_id, "object": "response", "created_at": created_at, "status": status,
        "completed_at": completed_at, "error": None, "incomplete_details": None,
        "instructions": raw.get("instructions"), "max_output_tokens": raw.get("max_output_tokens"),
        "max_tool_calls": raw.get("max_tool_calls"), "model": request.model, "output": output,
        "parallel_tool_calls": _given(raw, "parallel_tool_calls", True),
        "previous_response_id": raw.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None, **reasoning},
        "store": _given(raw, "store", True), "background": _given(raw, "background", False),
        "service_tier": _given(raw, "service_tier", "default"),
        "temperature": _given(raw, "temperature", 1.0), "top_p": _given(raw, "top_p", 1.0),
        "presence_penalty": _given(raw, "presence_penalty", 0.0),
        "frequency_penalty": _given(raw, "frequency_penalty", 0.0),
        "top_logprobs": _given(raw, "top_logprobs", 0),
        "text": {"format": {"type": "text"}, **{k: v for k, v in text.items() if v is not None}},
        "tool_choice": _given(raw, "tool_choice", "auto"), "tools": echoed_tools(raw.get("tools")),
        "truncation": _given(raw, "truncation", "disabled"),
        "usage": usage, "user": raw.get("user"), "metadata": raw.get("metadata") or {},
        "safety_identifier": raw.get("safety_identifier"), "prompt_cache_key": raw.get("prompt_cache_key"),
    }


def finish_status(reason: FinishReason) -> tuple[str, dict[str, Any] | None]:
    if reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = ([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
               if status == "completed" else [])
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name,
            "arguments": arguments}


def custom_item(item_id: str, call_id: str, name: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "custom_tool_call", "status": status, "call_id": call_id, "name": name,
            "input": text}


def shaped_item(shape: CallShape | None, item_id: str, call_id: str, name: str, arguments: str,
                status: str = "completed") -> dict[str, Any]:
    """A call item as the client's tool definition asks: function or custom, namespaced or not."""
    if shape is None:
        return call_item(item_id, call_id, name, arguments, status)
    if shape.kind == "custom":
        item = custom_item(item_id, call_id, shape.name, custom_input(arguments), status)
    else:
        item = call_item(item_id, call_id, shape.name, arguments, status)
    return {**item, "namespace": shape.namespace} if shape.namespace else item


def neutral_output(completion: Completion, shapes: dict[str, CallShape] | None = None) -> list[dict[str, Any]]:
    """Output items of a neutral answer; calls to freeform or namespaced tools take their Responses shape."""
    output: list[dict[str, Any]] = []
    if completion.text or not completion.tool_calls:
        output.append(message_item(new_id("msg"), completion.text))
    for call in completion.tool_calls:
        shape = (shapes or {}).get(call.name)
        prefix = "ctc" if shape is not None and shape.kind == "custom" else "fc"
        output.append(shaped_item(shape, new_id(prefix), call.id, call.name, call.arguments))
    return output


def native_response(events: list[Event], completion: Completion | None = None) -> dict[str, Any] | None:
    """The upstream's own response object among `events` (or stored with `completion`), if there is one."""
    for event in events:
        if isinstance(event, NativeEvent) and event.protocol == RESPONSES and event.name in ("response", STORED):
            return event.data
    if completion is not None and completion.native is not None and completion.native.get("object") == "response":
        return completion.native
    return None


def fresh_native(events: list[Event]) -> dict[str, Any] | None:
    """The upstream's whole response when it answered this request just now (not a replay)."""
    return next((e.data for e in events if isinstance(e, NativeEvent) and e.protocol == RESPONSES
                 and e.name == "response"), None)


def finish_native(native: dict[str, Any], request: ChatRequest, meta: dict[str, Any],
                  replay_as: tuple[str, int] | None = None) -> dict[str, Any]:
    """The upstream's own response with what daari must add: `daari_meta`, the client's previous_response_id
    (the upstream was sent the history instead), and for a replay (`replay_as`) a new id and creation time."""
    body = dict(native)
    if replay_as is not None:
        body["id"], body["created_at"] = replay_as
    previous = request.raw.get("previous_response_id")
    if previous is not None:
        body["previous_response_id"] = previous
    body["daari_meta"] = meta
    return body


def render_response(completion: Completion, request: ChatRequest, meta: dict[str, Any], events: list[Event],
                    response_id: str, created_at: int) -> dict[str, Any]:
    """A whole `response` object: the upstream's own when it spoke Responses, else built from `completion`."""
    fresh = fresh_native(events)
    if fresh is not None:
        return finish_native(fresh, request, meta)
    native = native_response(events, completion)
    if native is not None:
        return finish_native(native, request, meta, (response_id, created_at))
    status, incomplete = finish_status(completion.finish_reason)
    body = response_object(request, response_id, created_at, status,
                           neutral_output(completion, call_shapes(request)), usage_json(completion.usage),
                           completed_at=now() if status == "completed" else None)
    body["incomplete_details"] = incomplete
    body["daari_meta"] = with_translation_notes(meta, request)
    return body


def with_translation_notes(meta: dict[str, Any], request: ChatRequest) -> dict[str, Any]:
    """daari_meta of a translated answer, saying what of the request it could not honour (if anything)."""
    notes = lossy_translations(request)
    return {**meta, "translated": notes} if notes else meta


def capture_native(events: list[Event]) -> dict[str, Any] | None:
    """The upstream's final response object (whole body, or from the stream's terminal event), for L0.

    A stream's terminal response may omit `output`; it is rebuilt from the output_item.done events.
    """
    whole = native_response(events)
    if whole is not None:
        return whole
    done: dict[int, dict[str, Any]] = {}
    final: dict[str, Any] | None = None
    for event in events:
        if not isinstance(event, NativeEvent) or event.protocol != RESPONSES:
            continue
        if event.name == "response.output_item.done" and isinstance(event.data.get("item"), dict):
            done[output_index(event.data, len(done))] = event.data["item"]
        elif event.name in TERMINAL and isinstance(event.data.get("response"), dict):
            final = event.data["response"]
    if final is None:
        return None
    if not final.get("output"):
        final = {**final, "output": [done[i] for i in sorted(done)]}
    return final


def output_index(data: dict[str, Any], default: int) -> int:
    """An output item event's `output_index`; `default` (the next place) where an upstream sent none or no integer."""
    index = data.get("output_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else default


def replay(completion: Completion, stream: bool) -> list[Event]:
    """A stored answer as events: the upstream's own response whole when there is one, else neutrally."""
    native = native_response([], completion)
    finish = Finish(reason=completion.finish_reason, usage=completion.usage, model=completion.model)
    if native is not None:
        return [NativeEvent(RESPONSES, STORED, native), finish]
    return list(neutral_replay(completion)) if stream else []


def now() -> int:
    return int(time.time())
