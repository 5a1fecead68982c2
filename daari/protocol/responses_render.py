"""OpenAI Responses output: a whole `response` object, the SSE event sequence, and errors.

- Neutral answers (any tier) become one `message` item (output_text) and one `function_call` item per call.
- A Responses upstream's own response passes through (`NativeEvent("responses", ...)`): reasoning items with
  encrypted_content, custom tool calls and anything newer reach the client untouched. In a stream its events
  are written as they come, renumbered (`sequence_number`) and with daari's response id; its
  response.created / in_progress are not written again (daari's went first) and its response.completed is
  held until `finish`, so that `daari_meta` rides on the final response object.
- A whole stored response (an L0 hit, or a non-stream upstream answer to a stream) is replayed as the full
  event sequence: output_item.added, content_part.added, text deltas in pieces, the ...done events.
- `model` is the model the client asked for; the answering tier and upstream model are in `daari_meta`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

from daari.errors import DaariError
from daari.protocol.chat import ChatRequest, Completion, FinishReason, Usage
from daari.protocol.events import (
    Event,
    Finish,
    NativeEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    split_text,
)
from daari.protocol.events import replay as neutral_replay
from daari.protocol.responses_tools import CallShape, call_shapes, custom_arguments, custom_input
from daari.protocol.responses_wire import lossy_translations
from daari.protocol.sse import encode

RESPONSES = "responses"
TERMINAL = ("response.completed", "response.incomplete")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


def usage_json(usage: Usage) -> dict[str, Any]:
    return {"input_tokens": usage.prompt_tokens, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": usage.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.total_tokens}


def response_object(request: ChatRequest, response_id: str, created_at: int, status: str,
                    output: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
    """The `response` object around `output`, echoing the request's settings as OpenAI does."""
    raw = request.raw
    return {
        "id": response_id, "object": "response", "created_at": created_at, "status": status,
        "error": None, "incomplete_details": None,
        "instructions": raw.get("instructions"), "max_output_tokens": raw.get("max_output_tokens"),
        "model": request.model, "output": output,
        "parallel_tool_calls": raw.get("parallel_tool_calls", True),
        "previous_response_id": raw.get("previous_response_id"),
        "reasoning": raw.get("reasoning") or {"effort": None, "summary": None},
        "store": raw.get("store", True), "temperature": raw.get("temperature"),
        "text": raw.get("text") or {"format": {"type": "text"}},
        "tool_choice": raw.get("tool_choice", "auto"), "tools": raw.get("tools") or [],
        "top_p": raw.get("top_p"), "truncation": raw.get("truncation", "disabled"),
        "usage": usage, "user": raw.get("user"), "metadata": raw.get("metadata") or {},
    }


def _status(reason: FinishReason) -> tuple[str, dict[str, Any] | None]:
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
        if isinstance(event, NativeEvent) and event.protocol == RESPONSES and event.name == "response":
            return event.data
    if completion is not None and completion.native is not None and completion.native.get("object") == "response":
        return completion.native
    return None


def _finish_native(native: dict[str, Any], request: ChatRequest, response_id: str,
                   meta: dict[str, Any]) -> dict[str, Any]:
    return {**native, "id": response_id, "model": request.model, "previous_response_id":
            request.raw.get("previous_response_id"), "daari_meta": meta}


def render_response(completion: Completion, request: ChatRequest, meta: dict[str, Any], events: list[Event],
                    response_id: str, created_at: int) -> dict[str, Any]:
    """A whole `response` object: the upstream's own when it spoke Responses, else built from `completion`."""
    native = native_response(events, completion)
    if native is not None:
        return _finish_native(native, request, response_id, meta)
    status, incomplete = _status(completion.finish_reason)
    body = response_object(request, response_id, created_at, status,
                           neutral_output(completion, call_shapes(request)), usage_json(completion.usage))
    body["incomplete_details"] = incomplete
    body["daari_meta"] = _with_translation_notes(meta, request)
    return body


def _with_translation_notes(meta: dict[str, Any], request: ChatRequest) -> dict[str, Any]:
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
            done[int(event.data.get("output_index", len(done)))] = event.data["item"]
        elif event.name in TERMINAL and isinstance(event.data.get("response"), dict):
            final = event.data["response"]
    if final is None:
        return None
    if not final.get("output"):
        final = {**final, "output": [done[i] for i in sorted(done)]}
    return final


def replay(completion: Completion, stream: bool) -> list[Event]:
    """A stored answer as events: the upstream's own response whole when there is one, else neutrally."""
    native = native_response([], completion)
    finish = Finish(reason=completion.finish_reason, usage=completion.usage, model=completion.model)
    if native is not None:
        return [NativeEvent(RESPONSES, "response", native), finish]
    return list(neutral_replay(completion)) if stream else []


def error_object(err: DaariError) -> dict[str, Any]:
    return {"message": err.message, "type": err.openai_type, "param": err.param, "code": err.code}


class ResponsesStreamRenderer:
    """Turns events into Responses SSE bytes for one response; `on_final` sees the final response object
    (completed or failed) before its bytes are returned, so the route can store it first."""

    def __init__(self, request: ChatRequest, response_id: str, created_at: int,
                 on_final: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.request = request
        self.response_id = response_id
        self.created_at = created_at
        self.on_final = on_final
        self._seq = 0
        self._output: list[dict[str, Any]] = []  # finished items, by output_index
        self._open: dict[str, Any] | None = None  # the item being streamed: {"index", "item", "parts"}
        self._calls: dict[int, int] = {}  # neutral tool index -> output_index
        self._finish: Finish | None = None
        self._native = False
        self._native_final: dict[str, Any] | None = None
        self._native_done: dict[int, dict[str, Any]] = {}
        self._shapes = call_shapes(request)

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return encode(data, event=kind)

    def _shell(self, status: str) -> dict[str, Any]:
        return response_object(self.request, self.response_id, self.created_at, status, [], None)

    def start(self) -> list[bytes]:
        return [self._event("response.created", response=self._shell("in_progress")),
                self._event("response.in_progress", response=self._shell("in_progress"))]

    # -- neutral events -----------------------------------------------------------------------------------

    def _close(self) -> list[bytes]:
        """The ...done events of the item being streamed."""
        if self._open is None:
            return []
        index, item = self._open["index"], self._open["item"]
        self._open = None
        out: list[bytes] = []
        if item["type"] == "message":
            text = "".join(item["pieces"])
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            out.append(self._event("response.output_text.done", item_id=item["id"], output_index=index,
                                   content_index=0, text=text, logprobs=[]))
            out.append(self._event("response.content_part.done", item_id=item["id"], output_index=index,
                                   content_index=0, part=part))
            done = message_item(item["id"], text)
        elif item["type"] == "custom_tool_call":
            # Its function-form arguments are JSON around the input: the input goes out whole, at the end.
            arguments = "".join(item["pieces"])
            text = custom_input(arguments)
            at = {"item_id": item["id"], "output_index": index}
            if text:
                out.append(self._event("response.custom_tool_call_input.delta", **at, delta=text))
            out.append(self._event("response.custom_tool_call_input.done", **at, input=text))
            done = shaped_item(item["shape"], item["id"], item["call_id"], item["name"], arguments)
        else:
            arguments = "".join(item["pieces"])
            done = shaped_item(item["shape"], item["id"], item["call_id"], item["name"], arguments)
            out.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                   output_index=index, name=done["name"], arguments=arguments))
        out.append(self._event("response.output_item.done", output_index=index, item=done))
        self._output.append(done)
        return out

    def _text(self, text: str) -> list[bytes]:
        out: list[bytes] = []
        if self._open is None or self._open["item"]["type"] != "message":
            out.extend(self._close())
            index = len(self._output)
            item_id = new_id("msg")
            self._open = {"index": index, "item": {"id": item_id, "type": "message", "pieces": []}}
            out.append(self._event("response.output_item.added", output_index=index,
                                   item=message_item(item_id, "", status="in_progress")))
            out.append(self._event("response.content_part.added", item_id=item_id, output_index=index,
                                   content_index=0,
                                   part={"type": "output_text", "text": "", "annotations": [], "logprobs": []}))
        assert self._open is not None
        item = self._open["item"]
        item["pieces"].append(text)
        out.append(self._event("response.output_text.delta", item_id=item["id"], output_index=self._open["index"],
                               content_index=0, delta=text, logprobs=[]))
        return out

    def _call(self, ev: ToolCallStart) -> list[bytes]:
        out = self._close()
        index = len(self._output)
        shape = self._shapes.get(ev.name)
        custom = shape is not None and shape.kind == "custom"
        item_id = new_id("ctc" if custom else "fc")
        self._open = {"index": index, "item": {"id": item_id, "type": "custom_tool_call" if custom
                                               else "function_call", "call_id": ev.id, "name": ev.name,
                                               "shape": shape, "pieces": []}}
        self._calls[ev.index] = index
        added = shaped_item(shape, item_id, ev.id, ev.name, custom_arguments("") if custom else "",
                            status="in_progress")
        out.append(self._event("response.output_item.added", output_index=index, item=added))
        return out

    def _arguments(self, ev: ToolCallDelta) -> list[bytes]:
        if not ev.arguments or self._open is None or self._calls.get(ev.index) != self._open["index"]:
            return []
        item = self._open["item"]
        item["pieces"].append(ev.arguments)
        if item["type"] == "custom_tool_call":
            return []  # held until the call closes (see _close)
        return [self._event("response.function_call_arguments.delta", item_id=item["id"],
                            output_index=self._open["index"], delta=ev.arguments)]

    # -- native events ------------------------------------------------------------------------------------

    def _native_event(self, ev: NativeEvent) -> list[bytes]:
        self._native = True
        if ev.name == "response":  # a whole response (a replay, or a non-stream upstream answer)
            self._native_final = ev.data
            return self._replay_items(ev.data.get("output") or [])
        if ev.name in ("response.created", "response.in_progress", "response.queued"):
            return []
        if ev.name in TERMINAL:
            self._native_final = ev.data.get("response") if isinstance(ev.data.get("response"), dict) else {}
            return []
        if ev.name == "response.output_item.done" and isinstance(ev.data.get("item"), dict):
            self._native_done[int(ev.data.get("output_index", len(self._native_done)))] = ev.data["item"]
        fields = {k: v for k, v in ev.data.items() if k not in ("type", "sequence_number")}
        if "response_id" in fields:
            fields["response_id"] = self.response_id
        return [self._event(ev.name, **fields)]

    def _replay_items(self, output: list[dict[str, Any]]) -> list[bytes]:
        out: list[bytes] = []
        for index, item in enumerate(output):
            self._native_done[index] = item
            out.extend(self._replay_item(index, item))
        return out

    def _replay_item(self, index: int, item: dict[str, Any]) -> list[bytes]:
        kind, item_id = item.get("type"), item.get("id")
        if kind == "message":
            out = [self._event("response.output_item.added", output_index=index,
                               item={**item, "status": "in_progress", "content": []})]
            for c, part in enumerate(item.get("content") or []):
                text = part.get("text", "") if part.get("type") == "output_text" else ""
                empty = {**part, "text": ""} if part.get("type") == "output_text" else part
                out.append(self._event("response.content_part.added", item_id=item_id, output_index=index,
                                       content_index=c, part=empty))
                if part.get("type") == "output_text":
                    for piece in split_text(text):
                        out.append(self._event("response.output_text.delta", item_id=item_id, output_index=index,
                                               content_index=c, delta=piece, logprobs=[]))
                    out.append(self._event("response.output_text.done", item_id=item_id, output_index=index,
                                           content_index=c, text=text, logprobs=[]))
                out.append(self._event("response.content_part.done", item_id=item_id, output_index=index,
                                       content_index=c, part=part))
            return [*out, self._event("response.output_item.done", output_index=index, item=item)]
        if kind in ("function_call", "custom_tool_call"):
            key = "arguments" if kind == "function_call" else "input"
            value = str(item.get(key) or "")
            name = "function_call_arguments" if kind == "function_call" else "custom_tool_call_input"
            out = [self._event("response.output_item.added", output_index=index,
                               item={**item, key: "", "status": "in_progress"})]
            for piece in split_text(value, pieces=4, min_size=8):
                out.append(self._event(f"response.{name}.delta", item_id=item_id, output_index=index, delta=piece))
            done_fields = {key: value, **({"name": item.get("name")} if kind == "function_call" else {})}
            out.append(self._event(f"response.{name}.done", item_id=item_id, output_index=index, **done_fields))
            return [*out, self._event("response.output_item.done", output_index=index, item=item)]
        if kind == "reasoning":
            return self._replay_reasoning(index, item)
        # anything else: added and done, whole.
        return [self._event("response.output_item.added", output_index=index, item=item),
                self._event("response.output_item.done", output_index=index, item=item)]

    def _replay_reasoning(self, index: int, item: dict[str, Any]) -> list[bytes]:
        """A reasoning item with its summary parts streamed (clients such as Codex show them)."""
        summary = [p for p in item.get("summary") or [] if isinstance(p, dict)]
        out = [self._event("response.output_item.added", output_index=index, item={**item, "summary": []})]
        for s, part in enumerate(summary):
            at = {"item_id": item.get("id"), "output_index": index, "summary_index": s}
            text = str(part.get("text") or "")
            out.append(self._event("response.reasoning_summary_part.added", **at, part={**part, "text": ""}))
            for piece in split_text(text):
                out.append(self._event("response.reasoning_summary_text.delta", **at, delta=piece))
            out.append(self._event("response.reasoning_summary_text.done", **at, text=text))
            out.append(self._event("response.reasoning_summary_part.done", **at, part=part))
        return [*out, self._event("response.output_item.done", output_index=index, item=item)]

    def event(self, ev: Event) -> list[bytes]:
        if isinstance(ev, NativeEvent):
            return self._native_event(ev) if ev.protocol == RESPONSES else []
        if isinstance(ev, Finish):
            self._finish = ev
            return []
        if self._native:
            return []  # shadowed by the native events already written
        if isinstance(ev, TextDelta):
            return self._text(ev.text) if ev.text else []
        if isinstance(ev, ToolCallStart):
            return self._call(ev)
        if isinstance(ev, ToolCallDelta):
            return self._arguments(ev)
        return []

    def _final(self, response: dict[str, Any]) -> dict[str, Any]:
        if self.on_final is not None:
            self.on_final(response)
        return response

    def finish(self, meta: dict[str, Any]) -> list[bytes]:
        if self._native:
            native = dict(self._native_final or {})
            if not native.get("output"):
                native["output"] = [self._native_done[i] for i in sorted(self._native_done)]
            response = _finish_native(native, self.request, self.response_id, meta)
            kind = "response.incomplete" if response.get("status") == "incomplete" else "response.completed"
            return [self._event(kind, response=self._final(response))]
        out = self._close()
        finish = self._finish or Finish(reason="stop")
        if not self._output:  # an empty answer is still one (empty) message
            out.extend(self._text(""))
            out.extend(self._close())
        status, incomplete = _status(finish.reason)
        response = response_object(self.request, self.response_id, self.created_at, status, list(self._output),
                                   usage_json(finish.usage))
        response["incomplete_details"] = incomplete
        response["daari_meta"] = _with_translation_notes(meta, self.request)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        return [*out, self._event(kind, response=self._final(response))]

    def error(self, err: DaariError, meta: dict[str, Any]) -> list[bytes]:
        """A failure after the stream began: an `error` event, then `response.failed` (with daari_meta)."""
        response = self._shell("failed")
        # OpenAI's codes for a failed response are a closed set; daari's own code is in daari_meta.error.
        code = "rate_limit_exceeded" if err.status == 429 else "server_error"
        response["error"] = {"code": code, "message": err.message}
        response["daari_meta"] = meta
        return [self._event("error", code=err.code, message=err.message, param=err.param),
                self._event("response.failed", response=self._final(response))]


def now() -> int:
    return int(time.time())
