"""OpenAI response shapes both ways: render neutral results as chat.completion JSON, SSE chunks, errors and
the model list; decode an OpenAI-compatible upstream's responses and chunks into neutral events.

The `model` daari reports is the one the client asked for (tools and caches key on it); which tier and
upstream model answered goes in `daari_meta`, an extra field the official SDKs keep as an attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daari.errors import DaariError, UpstreamError
from daari.jsonio import dumps
from daari.protocol.chat import ChatRequest, Completion, FinishReason, Usage
from daari.protocol.events import Event, Finish, KeepAlive, TextDelta, ToolCallDelta, ToolCallStart
from daari.protocol.sse import encode

DONE = b"data: [DONE]\n\n"
_MARK = "\x00daari:delta\x00"  # stands for a delta's text in a frame built once (see `OpenAIStreamRenderer._frame`)
_MARK_JSON = dumps(_MARK)


def _finish_reason(reason: FinishReason) -> str:
    return "stop" if reason == "stop_sequence" else reason


def _usage(usage: Usage) -> dict[str, Any]:
    """An OpenAI upstream's own usage object as it sent it; otherwise built, with the details there are."""
    if usage.native is not None:
        return usage.native
    out: dict[str, Any] = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                           "total_tokens": usage.total_tokens}
    if usage.cached_tokens:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    if usage.reasoning_tokens:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def render_completion(completion: Completion, request: ChatRequest, meta: dict[str, Any], response_id: str,
                      created: int) -> dict[str, Any]:
    """A whole `chat.completion` object."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if completion.tool_calls and not completion.text else completion.text,
        "refusal": None,
    }
    if completion.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in completion.tool_calls
        ]
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": _finish_reason(completion.finish_reason)}],
        "usage": _usage(completion.usage),
        "daari_meta": meta,
    }


def render_error(err: DaariError) -> tuple[int, dict[str, Any]]:
    """HTTP status and OpenAI's error body."""
    return err.status, {"error": _error_object(err)}


def _error_object(err: DaariError) -> dict[str, Any]:
    return {"message": err.message, "type": err.openai_type, "param": err.param, "code": err.code}


def render_models(model_ids: list[str], created: int) -> dict[str, Any]:
    data = [{"id": m, "object": "model", "created": created, "owned_by": "daari"} for m in model_ids]
    return {"object": "list", "data": data}


class OpenAIStreamRenderer:
    """Turns neutral events into `chat.completion.chunk` SSE bytes for one response.

    Tool call indexes are renumbered densely in order of appearance: a neutral index may be an Anthropic
    content-block index (text at 0, first tool at 1), and OpenAI clients index their tool_calls arrays by it.
    """

    def __init__(self, request: ChatRequest, response_id: str, created: int) -> None:
        self.request = request
        self.response_id = response_id
        self.created = created
        self._reason: FinishReason = "stop"
        self._usage = Usage()
        self._tool_index: dict[int, int] = {}
        # The frame of a text delta and of a tool call's arguments delta, around the JSON string they carry:
        # built by `_delta` itself (a mark where the string goes), so the bytes stay the general path's.
        self._text_frame = self._frame(lambda mark: {"content": mark})
        self._arguments_frames: dict[int, tuple[bytes, bytes] | None] = {}

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        chunk: dict[str, Any] = {"id": self.response_id, "object": "chat.completion.chunk",
                                 "created": self.created, "model": self.request.model, "choices": choices}
        if self.request.include_usage:
            chunk["usage"] = None
        chunk.update(extra)
        return chunk

    def _delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return encode(self._chunk([{"index": 0, "delta": delta, "logprobs": None,
                                    "finish_reason": finish_reason}]))

    def _frame(self, delta: Callable[[str], dict[str, Any]]) -> tuple[bytes, bytes] | None:
        """The bytes `_delta(delta(text))` writes before and after `dumps(text)`; None when the mark is not found
        exactly once (then the general path renders)."""
        whole = self._delta(delta(_MARK))
        parts = whole.split(_MARK_JSON)
        return (parts[0], parts[1]) if len(parts) == 2 else None

    def start(self) -> list[bytes]:
        return [self._delta({"role": "assistant", "content": ""})]

    def event(self, ev: Event) -> list[bytes]:
        """The SSE frames of one event. A text or arguments delta (nearly every event of a stream) is its frame's
        bytes around `dumps(text)`; the rest goes through `event_by_shape`, the same bytes (tested)."""
        if isinstance(ev, TextDelta) and self._text_frame is not None:
            if not ev.text:
                return []
            head, tail = self._text_frame
            return [head + dumps(ev.text) + tail]
        if isinstance(ev, ToolCallDelta):
            if not ev.arguments:
                return []
            index = self._tool_index.setdefault(ev.index, len(self._tool_index))
            if index not in self._arguments_frames:
                self._arguments_frames[index] = self._frame(
                    lambda mark: {"tool_calls": [{"index": index, "function": {"arguments": mark}}]})
            frame = self._arguments_frames[index]
            if frame is not None:
                return [frame[0] + dumps(ev.arguments) + frame[1]]
        return self.event_by_shape(ev)

    def event_by_shape(self, ev: Event) -> list[bytes]:
        """`event`, each chunk built as a dict and encoded whole: the renderer of record."""
        if isinstance(ev, TextDelta):
            return [self._delta({"content": ev.text})] if ev.text else []
        if isinstance(ev, ToolCallStart):
            index = self._tool_index.setdefault(ev.index, len(self._tool_index))
            return [self._delta({"tool_calls": [{"index": index, "id": ev.id, "type": "function",
                                                 "function": {"name": ev.name, "arguments": ""}}]})]
        if isinstance(ev, ToolCallDelta):
            if not ev.arguments:
                return []
            index = self._tool_index.setdefault(ev.index, len(self._tool_index))
            return [self._delta({"tool_calls": [{"index": index, "function": {"arguments": ev.arguments}}]})]
        if isinstance(ev, Finish):
            self._reason, self._usage = ev.reason, ev.usage
        return []

    def finish(self, meta: dict[str, Any]) -> list[bytes]:
        """The finish chunk, the usage chunk when asked for, `daari_meta` on the last one, then [DONE]."""
        last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": _finish_reason(self._reason)}
        if not self.request.include_usage:
            return [encode(self._chunk([last], daari_meta=meta)), DONE]
        return [encode(self._chunk([last])),
                encode(self._chunk([], usage=_usage(self._usage), daari_meta=meta)), DONE]

    def error(self, err: DaariError, meta: dict[str, Any]) -> list[bytes]:
        """A mid-stream failure as OpenAI sends it (`data: {"error": ...}`): the SDKs raise APIError.

        No finish chunk and no [DONE] follow: the client must not mistake a failure for a normal stop.
        """
        return [encode({"error": _error_object(err), "daari_meta": meta})]


# --- upstream decoding ------------------------------------------------------------------------------------

_FINISH: dict[str, FinishReason] = {
    "stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def _malformed(what: str) -> UpstreamError:
    return UpstreamError(f"malformed upstream response: {what}")


def _map_finish(reason: object, has_tool_calls: bool) -> FinishReason:
    if reason == "error":  # OpenRouter-style: the upstream failed mid-answer
        raise UpstreamError("upstream reported finish_reason 'error'")
    mapped = _FINISH.get(reason, "stop") if isinstance(reason, str) else "stop"
    # Some servers (older Ollama) say "stop" after tool calls; agents act on "tool_calls".
    return "tool_calls" if has_tool_calls and mapped == "stop" else mapped


def _usage_from(value: object) -> Usage | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _malformed("usage is not an object")
    prompt, completion = value.get("prompt_tokens", 0) or 0, value.get("completion_tokens", 0) or 0
    if not isinstance(prompt, int) or not isinstance(completion, int):
        raise _malformed("usage token counts are not integers")
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 cached_tokens=_detail(value, "prompt_tokens_details", "cached_tokens"),
                 reasoning_tokens=_detail(value, "completion_tokens_details", "reasoning_tokens"), native=value)


def _detail(usage: dict[str, Any], group: str, name: str) -> int:
    details = usage.get(group)
    value = details.get(name) if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _logprobs(choice: dict[str, Any]) -> tuple[float | None, int]:
    """Summed token logprob and token count of a choice's logprobs.content, when present."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None, 0
    values = [t.get("logprob") for t in content if isinstance(t, dict)]
    if len(values) != len(content) or not all(isinstance(v, int | float) for v in values):
        raise _malformed("logprobs.content entries need a numeric logprob")
    return float(sum(values)), len(values)  # type: ignore[arg-type]


def _call_id(call: dict[str, Any], index: int) -> str:
    call_id = call.get("id")
    return call_id if isinstance(call_id, str) and call_id else f"call_{index}"


def _upstream_error(body: dict[str, Any]) -> UpstreamError:
    error = body.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    return UpstreamError(f"upstream error: {message if isinstance(message, str) else 'unknown error'}")


def _first_choice(body: dict[str, Any], allow_empty: bool) -> dict[str, Any] | None:
    choices = body.get("choices")
    if choices is None or choices == []:
        if allow_empty:
            return None
        raise _malformed("no choices")
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise _malformed("choices is not a list of objects")
    return choices[0]


def events_from_response(body: object) -> list[Event]:
    """The events of a whole (non-stream) upstream `chat.completion`."""
    if not isinstance(body, dict):
        raise _malformed("the body is not a JSON object")
    if body.get("error"):
        raise _upstream_error(body)
    choice = _first_choice(body, allow_empty=False)
    assert choice is not None
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _malformed("choices[0].message is not an object")
    content = message.get("content")
    if content is None:
        content = message.get("refusal") or ""
    if not isinstance(content, str):
        raise _malformed("message.content is not a string")
    events: list[Event] = []
    if content:
        logprob, tokens = _logprobs(choice)
        events.append(TextDelta(content, logprob=logprob, tokens=tokens))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _malformed("message.tool_calls is not a list")
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _malformed(f"tool_calls[{index}] has no function name")
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            raise _malformed(f"tool_calls[{index}].function.arguments is not a string")
        events.append(ToolCallStart(index=index, id=_call_id(call, index), name=function["name"]))
        if arguments:
            events.append(ToolCallDelta(index=index, arguments=arguments))
    model = body.get("model")
    events.append(Finish(reason=_map_finish(choice.get("finish_reason"), bool(calls)),
                         usage=_usage_from(body.get("usage")) or Usage(),
                         model=model if isinstance(model, str) else ""))
    return events


class ChunkDecoder:
    """Turns an upstream's `chat.completion.chunk` objects into events, one chunk at a time.

    `Finish` waits for usage: OpenAI sends it in a chunk after the finish_reason chunk, so it is emitted
    when usage arrives or at `end()`. `end()` raises "truncated stream" when no finish_reason ever came.
    Only the first choice is read (daari asks upstreams for one).
    """

    def __init__(self) -> None:
        self._reason: object = None
        self._usage: Usage | None = None
        self._model = ""
        self._finish_sent = False
        self._ids: dict[int, str] = {}  # upstream tool index -> call id, once started
        self._pending: dict[int, list[str]] = {}  # arguments that came before the call's name
        self._by_id: dict[str, int] = {}
        self._last_index = 0

    @property
    def finished(self) -> bool:
        """A finish_reason has arrived: the answer is whole even if usage or [DONE] never comes."""
        return self._reason is not None

    def _index(self, call: dict[str, Any]) -> int:
        index = call.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        # No index (some compatible servers): a new id starts a new call, no id continues the last one.
        call_id = call.get("id")
        if isinstance(call_id, str) and call_id:
            if call_id not in self._by_id:
                self._by_id[call_id] = max([*self._ids, *self._pending], default=-1) + 1
            return self._by_id[call_id]
        return self._last_index

    def _tool_calls(self, calls: object) -> list[Event]:
        if not isinstance(calls, list):
            raise _malformed("delta.tool_calls is not a list")
        events: list[Event] = []
        for call in calls:
            if not isinstance(call, dict):
                raise _malformed("a tool_calls delta is not an object")
            index = self._index(call)
            self._last_index = index
            function = call.get("function") or {}
            if not isinstance(function, dict):
                raise _malformed("a tool_calls delta has a non-object function")
            name = function.get("name")
            if index not in self._ids and isinstance(name, str) and name:
                call_id = _call_id(call, index)
                self._ids[index] = call_id
                self._by_id.setdefault(call_id, index)
                events.append(ToolCallStart(index=index, id=call_id, name=name))
                events.extend(ToolCallDelta(index, piece) for piece in self._pending.pop(index, []))
            arguments = function.get("arguments")
            if arguments is None or arguments == "":
                continue
            if not isinstance(arguments, str):
                raise _malformed("tool_calls arguments is not a string")
            if index in self._ids:
                events.append(ToolCallDelta(index=index, arguments=arguments))
            else:
                self._pending.setdefault(index, []).append(arguments)
        return events

    def _finish(self) -> Finish:
        self._finish_sent = True
        return Finish(reason=_map_finish(self._reason, bool(self._ids)), usage=self._usage or Usage(),
                      model=self._model)

    def feed(self, chunk: object) -> list[Event]:
        """The events of one chunk. A plain text delta (nearly every chunk of a stream: content, no tool calls,
        finish_reason, logprobs, usage nor error) is read with a few look-ups; any other goes through
        `feed_by_shape`, the decoder of record (the same events: tested on real and generated chunks)."""
        if type(chunk) is dict and self._reason is None and chunk.get("usage") is None \
                and not chunk.get("error"):
            choices = chunk.get("choices")
            if type(choices) is list and choices and type(choice := choices[0]) is dict:
                delta = choice.get("delta")
                if type(delta) is dict and type(text := delta.get("content")) is str and text \
                        and delta.get("tool_calls") is None and choice.get("finish_reason") is None \
                        and choice.get("logprobs") is None:
                    model = chunk.get("model")
                    if type(model) is str:
                        self._model = model
                    return [TextDelta(text)]
        return self.feed_by_shape(chunk)

    def feed_by_shape(self, chunk: object) -> list[Event]:
        """`feed`, every field checked as the chunk's schema says."""
        if not isinstance(chunk, dict):
            raise _malformed("a stream chunk is not a JSON object")
        if chunk.get("error"):
            raise _upstream_error(chunk)
        if isinstance(chunk.get("model"), str):
            self._model = chunk["model"]
        usage = _usage_from(chunk.get("usage"))
        if usage is not None:
            self._usage = usage
        events: list[Event] = []
        choice = _first_choice(chunk, allow_empty=True)
        if choice is not None and not self._finish_sent:
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise _malformed("choices[0].delta is not an object")
            text = delta.get("content")
            if text is not None and not isinstance(text, str):
                raise _malformed("delta.content is not a string")
            if text:
                logprob, tokens = _logprobs(choice)
                events.append(TextDelta(text, logprob=logprob, tokens=tokens))
            elif delta.get("reasoning_content") or delta.get("reasoning"):
                # A reasoning model thinking (vLLM, DeepSeek, Ollama's /v1): alive, nothing to show.
                events.append(KeepAlive())
            if delta.get("tool_calls") is not None:
                events.extend(self._tool_calls(delta["tool_calls"]))
            if choice.get("finish_reason") is not None:
                self._reason = choice["finish_reason"]
        if self._reason is not None and usage is not None and not self._finish_sent:
            events.append(self._finish())
        return events

    def end(self) -> list[Event]:
        """At [DONE] or the end of the body: the held `Finish`, or "truncated stream"."""
        if self._finish_sent:
            return []
        if self._reason is None:
            raise UpstreamError("truncated stream: the upstream ended without a finish_reason")
        return [self._finish()]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
