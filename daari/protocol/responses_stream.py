"""The Responses SSE stream for one response: `response.created`, `response.in_progress`, per output item
`output_item.added` / `content_part.added` / deltas / the ...done events, then `response.completed` (or
`response.incomplete`; `error` + `response.failed` on a fault), every event with its `sequence_number`.

- Neutral events are rendered as they come; a freeform tool's input goes out whole when its call closes (its
  function-form arguments are JSON around it).
- `response.created` and `response.in_progress` go out with the first event, not at `start`: when a
  Responses upstream answers, its own events pass through byte for byte (as it sent them: its ids, its
  sequence numbers, its created and in_progress), and daari rewrites only the terminal event (it carries
  `daari_meta`) and, when the client chained with `previous_response_id`, the response snapshots (they
  name it again). Its terminal response is held until `finish` for that. An upstream whose stream does not
  open with its own created / in_progress gets daari's first, and its events are renumbered after them.
- A whole response (a non-stream upstream answer to a stream: its own id; an L0 hit: a new one) is replayed
  as the full event sequence, text and reasoning summaries in pieces.
- A failure after the stream began is `error` (OpenAI's shape: code, message and param at the top) then
  `response.failed`, numbered after the last event written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daari.errors import DaariError
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event, Finish, NativeEvent, TextDelta, ToolCallDelta, ToolCallStart, split_text
from daari.protocol.responses_render import (
    RESPONSES,
    STORED,
    TERMINAL,
    finish_native,
    finish_status,
    message_item,
    new_id,
    now,
    output_index,
    response_object,
    shaped_item,
    usage_json,
    with_translation_notes,
)
from daari.protocol.responses_tools import call_shapes, custom_arguments, custom_input
from daari.protocol.sse import encode

_OPENING = ("response.created", "response.queued", "response.in_progress")


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
        self._native_shell: dict[str, Any] | None = None  # the upstream's own response snapshot, once seen
        self._verbatim = False  # the upstream's events go out as it sent them (it opened the stream itself)
        self._terminal_seq: int | None = None  # the upstream's number for its terminal event
        self._started = False
        self._shapes = call_shapes(request)

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return encode(data, event=kind)

    def _shell(self, status: str) -> dict[str, Any]:
        if self._native_shell is not None:  # the upstream's own snapshot: its id, its settings
            shell = {**self._native_shell, "status": status}
            previous = self.request.raw.get("previous_response_id")
            return {**shell, "previous_response_id": previous} if previous is not None else shell
        return response_object(self.request, self.response_id, self.created_at, status, [], None)

    def start(self) -> list[bytes]:
        return []  # created / in_progress go out with the first event: the upstream's own, when it has them

    def _begin(self) -> list[bytes]:
        """daari's own response.created and response.in_progress, unless the stream already opened."""
        if self._started:
            return []
        self._started = True
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
        out: list[bytes] = self._begin()
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
        out = [*self._begin(), *self._close_message()]
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
        if ev.name in ("response", STORED):  # a whole response (a non-stream upstream answer, or an L0 replay)
            self._native_final = ev.data
            if ev.name == "response":  # the upstream's own: its id and settings in the snapshots too
                self._adopt({**ev.data, "status": "in_progress", "output": [], "usage": None,
                             "completed_at": None, "error": None, "incomplete_details": None})
            return [*self._begin(), *self._replay_items(ev.data.get("output") or [])]
        if ev.name in _OPENING:
            if self._started and not self._verbatim:
                return []  # daari's own opening went first
            if not self._started:
                self._started = self._verbatim = True
                if isinstance(ev.data.get("response"), dict):
                    self._adopt(ev.data["response"])
            return [self._pass(ev, snapshot=True)]
        out = self._begin()  # an upstream that did not open its stream itself: daari's opening first
        if ev.name in TERMINAL:
            self._native_final = ev.data.get("response") if isinstance(ev.data.get("response"), dict) else {}
            if self._verbatim and isinstance(ev.data.get("sequence_number"), int):
                self._terminal_seq = ev.data["sequence_number"]
            return out
        if ev.name == "response.output_item.done" and isinstance(ev.data.get("item"), dict):
            self._native_done[output_index(ev.data, len(self._native_done))] = ev.data["item"]
        return [*out, self._pass(ev)]

    def _adopt(self, snapshot: dict[str, Any]) -> None:
        """Take the upstream's response as this one: its id (the route stores it under that id)."""
        self._native_shell = snapshot
        if isinstance(snapshot.get("id"), str):
            self.response_id = snapshot["id"]
        if isinstance(snapshot.get("created_at"), int):
            self.created_at = snapshot["created_at"]

    def _pass(self, ev: NativeEvent, snapshot: bool = False) -> bytes:
        """One upstream event: as sent when the upstream opened the stream, else numbered after daari's."""
        if self._verbatim:
            number = ev.data.get("sequence_number")
            if isinstance(number, int):
                self._seq = max(self._seq, number + 1)
            previous = self.request.raw.get("previous_response_id")
            if snapshot and previous is not None and isinstance(ev.data.get("response"), dict):
                # the client chained with previous_response_id: the snapshot names it, as OpenAI's would
                return encode({**ev.data, "response": {**ev.data["response"], "previous_response_id": previous}},
                              event=ev.name)
            return ev.raw if ev.raw is not None else encode(ev.data, event=ev.name)
        fields = {k: v for k, v in ev.data.items() if k not in ("type", "sequence_number")}
        if "response_id" in fields:
            fields["response_id"] = self.response_id
        return self._event(ev.name, **fields)

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
            replay_as = None if self._native_shell is not None else (self.response_id, self.created_at)
            response = finish_native(native, self.request, meta, replay_as)
            kind = "response.incomplete" if response.get("status") == "incomplete" else "response.completed"
            if self._terminal_seq is not None:  # the upstream's terminal event, with daari_meta added
                data = {"type": kind, "sequence_number": self._terminal_seq, "response": self._final(response)}
                return [encode(data, event=kind)]
            return [*self._begin(), self._event(kind, response=self._final(response))]
        out = [*self._begin(), *self._close_all()]
        finish = self._finish or Finish(reason="stop")
        if not self._output:  # an empty answer is still one (empty) message
            out.extend(self._text(""))
            out.extend(self._close_message())
        status, incomplete = finish_status(finish.reason)
        output = [self._output[i] for i in sorted(self._output)]
        response = response_object(self.request, self.response_id, self.created_at, status, output,
                                   usage_json(finish.usage), completed_at=now() if status == "completed" else None)
        response["incomplete_details"] = incomplete
        response["daari_meta"] = with_translation_notes(meta, self.request)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        return [*out, self._event(kind, response=self._final(response))]

    def error(self, err: DaariError, meta: dict[str, Any]) -> list[bytes]:
        """A failure after the stream began: an `error` event, then `response.failed` (with daari_meta)."""
        out = self._begin()
        response = self._shell("failed")
        # OpenAI's codes for a failed response are a closed set; daari's own code is in daari_meta.error.
        code = "rate_limit_exceeded" if err.status == 429 else "server_error"
        response["error"] = {"code": code, "message": err.message}
        response["daari_meta"] = meta
        # OpenAI's wire shape (code, message, param at the top), not the Open Responses `error` object: the
        # OpenAI SDKs abort a stream at any event whose data has an `error` member, so the client would never
        # see response.failed (docs/agents.md, "Conformance").
        return [*out, self._event("error", code=err.code, message=err.message, param=err.param),
                self._event("response.failed", response=self._final(response))]
