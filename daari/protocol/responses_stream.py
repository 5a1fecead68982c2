"""The Responses SSE stream for one response: `response.created`, `response.in_progress`, per output item
`output_item.added` / `content_part.added` / deltas / the ...done events, then `response.completed` (or
`response.incomplete`; `error` + `response.failed` on a fault), every event with its `sequence_number`.

- Neutral events are rendered as they come; a freeform tool's input goes out whole when its call closes (its
  function-form arguments are JSON around it).
- A Responses upstream's own events (`NativeEvent("responses", ...)`) are written as they come, renumbered and
  with daari's response id; its response.created / in_progress are not written again (daari's went first)
  and its terminal response is held until `finish`, so that `daari_meta` rides on the final response object.
- A whole stored response (an L0 hit, or a non-stream upstream answer to a stream) is replayed as the full
  event sequence, text and reasoning summaries in pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daari.errors import DaariError
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event, Finish, NativeEvent, TextDelta, ToolCallDelta, ToolCallStart, split_text
from daari.protocol.responses_render import (
    RESPONSES,
    TERMINAL,
    finish_native,
    finish_status,
    message_item,
    new_id,
    response_object,
    shaped_item,
    usage_json,
    with_translation_notes,
)
from daari.protocol.responses_tools import call_shapes, custom_arguments, custom_input
from daari.protocol.sse import encode


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
        self._output: dict[int, dict[str, Any]] = {}  # finished items by output_index
        self._next_index = 0
        self._message: dict[str, Any] | None = None  # the message being streamed: {"index", "item"}
        self._open_calls: dict[int, dict[str, Any]] = {}  # neutral tool index -> {"index", "item"}
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
    # One message item at a time; tool calls stay open until the answer ends, so an upstream that interleaves
    # the argument pieces of parallel calls loses none of them.

    def _close(self, state: dict[str, Any]) -> list[bytes]:
        """The ...done events of one streamed item."""
        index, item = state["index"], state["item"]
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
        self._output[index] = done
        return out

    def _close_message(self) -> list[bytes]:
        message, self._message = self._message, None
        return self._close(message) if message is not None else []

    def _close_all(self) -> list[bytes]:
        out = self._close_message()
        for state in sorted(self._open_calls.values(), key=lambda s: int(s["index"])):
            out.extend(self._close(state))
        self._open_calls.clear()
        return out

    def _text(self, text: str) -> list[bytes]:
        out: list[bytes] = []
        if self._message is None:
            index = self._next_index
            self._next_index += 1
            item_id = new_id("msg")
            self._message = {"index": index, "item": {"id": item_id, "type": "message", "pieces": []}}
            out.append(self._event("response.output_item.added", output_index=index,
                                   item=message_item(item_id, "", status="in_progress")))
            out.append(self._event("response.content_part.added", item_id=item_id, output_index=index,
                                   content_index=0,
                                   part={"type": "output_text", "text": "", "annotations": [], "logprobs": []}))
        item = self._message["item"]
        item["pieces"].append(text)
        out.append(self._event("response.output_text.delta", item_id=item["id"],
                               output_index=self._message["index"], content_index=0, delta=text, logprobs=[]))
        return out

    def _call(self, ev: ToolCallStart) -> list[bytes]:
        out = self._close_message()
        index = self._next_index
        self._next_index += 1
        shape = self._shapes.get(ev.name)
        custom = shape is not None and shape.kind == "custom"
        item_id = new_id("ctc" if custom else "fc")
        self._open_calls[ev.index] = {"index": index, "item": {
            "id": item_id, "type": "custom_tool_call" if custom else "function_call", "call_id": ev.id,
            "name": ev.name, "shape": shape, "pieces": []}}
        added = shaped_item(shape, item_id, ev.id, ev.name, custom_arguments("") if custom else "",
                            status="in_progress")
        out.append(self._event("response.output_item.added", output_index=index, item=added))
        return out

    def _arguments(self, ev: ToolCallDelta) -> list[bytes]:
        state = self._open_calls.get(ev.index)
        if not ev.arguments or state is None:
            return []
        item = state["item"]
        item["pieces"].append(ev.arguments)
        if item["type"] == "custom_tool_call":
            return []  # held until the call closes (see _close)
        return [self._event("response.function_call_arguments.delta", item_id=item["id"],
                            output_index=state["index"], delta=ev.arguments)]

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
            response = finish_native(native, self.request, self.response_id, meta)
            kind = "response.incomplete" if response.get("status") == "incomplete" else "response.completed"
            return [self._event(kind, response=self._final(response))]
        out = self._close_all()
        finish = self._finish or Finish(reason="stop")
        if not self._output:  # an empty answer is still one (empty) message
            out.extend(self._text(""))
            out.extend(self._close_message())
        status, incomplete = finish_status(finish.reason)
        output = [self._output[i] for i in sorted(self._output)]
        response = response_object(self.request, self.response_id, self.created_at, status, output,
                                   usage_json(finish.usage))
        response["incomplete_details"] = incomplete
        response["daari_meta"] = with_translation_notes(meta, self.request)
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
