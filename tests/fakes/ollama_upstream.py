"""A fake Ollama server (ASGI): POST /api/chat as NDJSON (stream or one object) and GET /api/tags.

The behaviour is picked by the request's model name: good, refuse, short, long (`options.num_predict` words, 100
without it, one line each: benchmarks of the stream relay), tools, hang, error500, drop,
malformed, stream_error, missing, flaky (500 on its first request, then good), and the tool calls local models
write as text, streamed one character a line so every split point is crossed: hermes (`<tool_call>{json}`),
qwen (`<function=..><parameter=..>`), bare (a JSON object), fenced (```json), mistral (`[TOOL_CALLS]`),
badargs (a Hermes call whose arguments break the tool's schema). POST /api/show answers `model_info` with
`<arch>.context_length` from `windows` (model name -> tokens; 32768 when not set). Shapes follow Ollama's
docs/api.md: `message.content` pieces, `message.tool_calls[].function.arguments` as an object, a final
line with `done: true`, `done_reason`, `prompt_eval_count`, `eval_count`; `logprobs` per chunk when the
request asked for them. `token_delay_s` (default 0) waits that long before each content line (and once per
content line before a `stream: false` answer), so benchmarks can measure time to first token. `usages` holds the
(prompt_eval_count, eval_count) of every final line the fake sent or was about to send, in order.
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.lowlevel

from daari.server.asgi_io import answer_lifespan, read_all

Scope = dict[str, Any]

# What /api/tags lists: every behaviour but "missing" (a model that was never pulled).
BEHAVIOURS = ("good", "long", "tools", "refuse", "short", "hang", "error500", "drop", "malformed", "stream_error",
              "flaky", "hermes", "qwen", "bare", "fenced", "mistral", "badargs")
MODELS = [f"{name}:latest" for name in BEHAVIOURS]
CREATED_AT = "2025-01-01T00:00:00.000000Z"


class FakeOllama:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # /api/chat bodies, as parsed JSON
        self.usages: list[tuple[int, int]] = []  # (prompt_eval_count, eval_count) of each final line
        self.streams_opened = 0
        self.streams_closed_by_client = 0  # streams the client cut before their end
        self.hanging = trio.Event()  # set once a "hang" request is waiting
        self.client_closed = trio.Event()  # set when a client first cuts a stream
        self._seen: dict[str, int] = {}
        self.token_delay_s = 0.0  # before each streamed content line
        self.windows: dict[str, int] = {}  # model -> context length reported by /api/show
        self.shows: list[str] = []  # models /api/show was asked about

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        if scope["type"] != "http":
            return
        body = await read_all(receive)
        path, method = scope["path"], scope["method"]
        if path == "/api/tags" and method == "GET":
            await _json(send, 200, {"models": [_tag(name) for name in MODELS]})
        elif path == "/api/chat" and method == "POST":
            await self._chat(json.loads(body), receive, send)
        elif path == "/api/show" and method == "POST":
            model = str(json.loads(body).get("model"))
            self.shows.append(model)
            info = {"general.architecture": "llama", "llama.context_length": self.windows.get(model, 32768)}
            await _json(send, 200, {"modelfile": "", "parameters": "", "details": {"family": "llama"},
                                    "model_info": info})
        else:
            await _json(send, 404, {"error": "404 page not found"}, content_type="text/plain")

    async def _chat(self, request: dict[str, Any], receive: Any, send: Any) -> None:
        self.requests.append(request)
        model = request.get("model", "")
        behaviour = model.split(":")[0]
        self._seen[behaviour] = self._seen.get(behaviour, 0) + 1
        if behaviour == "missing":
            await _json(send, 404, {"error": f"model '{model}' not found"})
            return
        if behaviour == "error500" or (behaviour == "flaky" and self._seen[behaviour] == 1):
            await _json(send, 500, {"error": "llama runner process has terminated"})
            return
        self.streams_opened += 1
        progress = _Progress()
        async with trio.open_nursery() as nursery:
            # Hypercorn does not raise in the app when the client goes away: watch for http.disconnect.
            nursery.start_soon(_watch_disconnect, receive, nursery.cancel_scope)
            await self._respond(behaviour, model, request, send, progress)
            nursery.cancel_scope.cancel()
        if not progress.sent_all:
            self.streams_closed_by_client += 1
            self.client_closed.set()

    async def _respond(self, behaviour: str, model: str, request: dict[str, Any], send: Any,
                       progress: _Progress) -> None:
        if behaviour == "hang":
            self.hanging.set()
            await trio.sleep_forever()
        stream = request.get("stream", True)
        logprobs = bool(request.get("logprobs"))
        predict = (request.get("options") or {}).get("num_predict")
        lines = _script(behaviour, model, logprobs, predict if isinstance(predict, int) else 100)
        self.usages += [(line["prompt_eval_count"], line["eval_count"]) for line in lines
                        if isinstance(line, dict) and line.get("done")]
        if not stream:
            if self.token_delay_s:
                await trio.sleep(self.token_delay_s * sum(1 for line in lines if _is_content(line)))
            progress.sent_all = True
            await _json(send, 200, _merge(lines))
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/x-ndjson")]})
        for line in lines:
            if self.token_delay_s and _is_content(line):
                await trio.sleep(self.token_delay_s)
            await send({"type": "http.response.body", "more_body": True,
                        "body": line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n"})
            await trio.lowlevel.checkpoint()
        if behaviour == "drop":
            # Hypercorn closes the connection without the chunked terminator when the app fails here.
            raise RuntimeError("fake ollama: dropping the connection mid-stream")
        # Hypercorn reports http.disconnect as soon as the last body is sent: mark the stream whole first.
        progress.sent_all = True
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _is_content(line: dict[str, Any] | bytes) -> bool:
    return isinstance(line, dict) and not line.get("done") and "message" in line


class _Progress:
    sent_all = False


async def _watch_disconnect(receive: Any, scope: trio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


def _chunk(model: str, content: str, logprobs: bool, **message: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = {"model": model, "created_at": CREATED_AT,
                             "message": {"role": "assistant", "content": content, **message}, "done": False}
    if logprobs and content:
        chunk["logprobs"] = [{"token": content, "logprob": -0.5, "bytes": list(content.encode()),
                              "top_logprobs": []}]
    return chunk


def _done(model: str, reason: str, prompt: int = 12, completion: int = 3) -> dict[str, Any]:
    return {"model": model, "created_at": CREATED_AT, "message": {"role": "assistant", "content": ""},
            "done": True, "done_reason": reason, "total_duration": 1_000_000, "load_duration": 10_000,
            "prompt_eval_count": prompt, "prompt_eval_duration": 100_000, "eval_count": completion,
            "eval_duration": 800_000}


def _script(behaviour: str, model: str, logprobs: bool, words: int = 100) -> list[dict[str, Any] | bytes]:
    if behaviour == "long":
        return [*(_chunk(model, f"word{i} ", logprobs) for i in range(words)), _done(model, "length", completion=words)]
    if behaviour in ("good", "flaky"):
        return [_chunk(model, "Hello", logprobs), _chunk(model, " there", logprobs),
                _chunk(model, "!", logprobs), _done(model, "stop")]
    if behaviour == "refuse":
        return [_chunk(model, "I can't help with that.", logprobs), _done(model, "stop", completion=7)]
    if behaviour == "short":
        return [_chunk(model, "Once upon", logprobs), _done(model, "length", completion=2)]
    if behaviour == "tools":
        call = {"function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
        return [_chunk(model, "", logprobs, tool_calls=[call]), _done(model, "stop", completion=20)]
    if behaviour in TEXT_TOOL_CALLS:
        return [_chunk(model, char, logprobs) for char in TEXT_TOOL_CALLS[behaviour]] + [_done(model, "stop")]
    if behaviour == "drop":
        return [_chunk(model, "Hel", logprobs)]
    if behaviour == "malformed":
        return [_chunk(model, "Hel", logprobs), b"this is not json\n"]
    if behaviour == "stream_error":
        return [_chunk(model, "Hel", logprobs), {"error": "an error was encountered while running the model"}]
    raise ValueError(f"fake ollama has no behaviour for model {model!r}")


# Tool calls as local models print them (to a `get_weather(city, days)` tool), when a server has no tool parser.
TEXT_TOOL_CALLS = {
    "hermes": 'I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
              '</tool_call>',
    "qwen": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n"
            "</parameter>\n</function>\n</tool_call>",
    "bare": '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}',
    "fenced": 'Sure.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n```\n',
    "mistral": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]',
    "badargs": '<tool_call>{"name": "get_weather", "arguments": {"city": 7}}</tool_call>',
}


def _merge(lines: list[dict[str, Any] | bytes]) -> dict[str, Any]:
    """The `stream: false` answer: one object with the whole message and the final counts."""
    chunks = [line for line in lines if isinstance(line, dict)]
    final = dict(chunks[-1])
    message = {"role": "assistant", "content": "".join(c["message"]["content"] for c in chunks)}
    calls = [call for c in chunks for call in c["message"].get("tool_calls", [])]
    if calls:
        message["tool_calls"] = calls
    final["message"] = message
    return final


def _tag(name: str) -> dict[str, Any]:
    return {"name": name, "model": name, "modified_at": CREATED_AT, "size": 1_000, "digest": "0" * 64,
            "details": {"format": "gguf", "family": "llama", "parameter_size": "1B",
                        "quantization_level": "Q4_0"}}


async def _json(send: Any, status: int, data: dict[str, Any], content_type: str = "application/json") -> None:
    payload = json.dumps(data).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()),
                            (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})
