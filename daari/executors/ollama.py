"""The Ollama executor: native POST /api/chat, always streamed as NDJSON, turned into neutral events.

Only the wire mapping lives here; timeouts, retries and the breaker come from `ResilientExecutor`.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

import httpx
import trio

from daari.config import TierConfig
from daari.errors import InvalidRequest, UpstreamError, UpstreamRateLimited, UpstreamUnavailable
from daari.executors.base import Emit, read_done
from daari.executors.http_upstream import HttpUpstream, endpoint, request_never_arrived, response_started
from daari.executors.upstream_http import UpstreamResponse
from daari.jsonio import loads
from daari.local.context_fit import num_ctx
from daari.local.tool_repair import repairing, repairs_tools
from daari.protocol.chat import ChatRequest, FinishReason, Message, Tool, Usage
from daari.protocol.events import Event, Finish, KeepAlive, TextDelta, ToolCallDelta, ToolCallStart
from daari.protocol.tokens import estimate_request_tokens

log = logging.getLogger("daari.upstream")

# OpenAI-named sampling parameters that Ollama takes under the same name in `options`.
SAME_NAME_OPTIONS = ("top_p", "top_k", "seed", "presence_penalty", "frequency_penalty")


class OllamaExecutor(HttpUpstream):
    kind = "ollama"
    supports_tools = True
    flushes_per_read = True  # `_relay` calls read_done after each read's lines

    def __init__(self, tier: str, config: TierConfig) -> None:
        super().__init__(tier, config)
        if not config.base_url:
            raise ValueError(f"{tier}: the ollama executor needs base_url")
        self.base_url = config.base_url.rstrip("/")
        self.repairs = repairs_tools(config)
        self._windows: dict[str, int | None] = {}  # model -> context length from /api/show (None: it could not say)
        self._listed: frozenset[str] | None = None

    def status(self) -> dict[str, Any]:
        return {"model": self.config.model, "started": self.started, "context_window": self.context_window()}

    async def start(self, nursery: trio.Nursery | None = None) -> None:
        """Open the pool, then ask Ollama (briefly) which models it has and the tier model's context window."""
        await super().start(nursery)
        with trio.move_on_after(min(5.0, self.config.timeouts.connect_s)):
            await self.list_models()
            if self.config.model and self.config.context_window is None:
                await self.model_window(self.config.model)

    def context_window(self) -> int | None:
        if self.config.context_window is not None:
            return self.config.context_window
        return self._windows.get(self.config.model) if self.config.model else None

    def listed_models(self) -> frozenset[str] | None:
        return self._listed

    async def model_window(self, model: str) -> int | None:
        """The model's trained context length from POST /api/show (`model_info["<arch>.context_length"]`),
        remembered; None when Ollama cannot say."""
        if model in self._windows:
            return self._windows[model]
        timeout = httpx.Timeout(self.config.timeouts.first_byte_s, connect=self.config.timeouts.connect_s)
        try:
            response = await self.http().post(endpoint(self.base_url, "/api/show"), json={"model": model},
                                              timeout=timeout)
            response.raise_for_status()
            window = context_length(response.json())
        except (httpx.HTTPError, ValueError, TypeError, AttributeError) as exc:
            log.warning("upstream %s: /api/show for %s failed (%s): its context window is unknown", self.name,
                        model, type(exc).__name__)
            window = None
        self._windows[model] = window  # asked once per model (a restart of daari asks again)
        return window

    async def list_models(self) -> list[str]:
        """Model names from GET /api/tags, for GET /v1/models; any failure gives []."""
        timeout = httpx.Timeout(self.config.timeouts.first_byte_s, connect=self.config.timeouts.connect_s)
        try:
            response = await self.http().get(endpoint(self.base_url, "/api/tags"), timeout=timeout)
            response.raise_for_status()
            models = response.json().get("models") or []
            names = [m.get("name") or m["model"] for m in models]
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("upstream %s: listing models failed (%s)", self.name, type(exc).__name__)
            return []
        # "qwen3" names "qwen3:latest": both are names a client may send
        self._listed = frozenset([*names, *(n.removesuffix(":latest") for n in names)])
        return names

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        model = self.config.model or request.model
        window = self.config.context_window or await self.model_window(model)
        body = chat_body(request, self.config, window)
        emit = repairing(request, emit, self.repairs)
        try:
            async with self.http().stream("POST", endpoint(self.base_url, "/api/chat"), json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._status_error(response, model)
                await response_started(emit)
                await self._relay(response, emit)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise UpstreamUnavailable(f"{self.name}: cannot connect to Ollama at {_where(self.base_url)}",
                                      upstream=self.name, retryable=True) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            # The request was sent: Ollama may have generated (and spent the time); not retried.
            raise UpstreamError(f"{self.name}: truncated stream (Ollama closed the connection before done)",
                                upstream=self.name) from exc
        except httpx.TransportError as exc:
            raise UpstreamError(f"{self.name}: transport error talking to Ollama ({type(exc).__name__})",
                                upstream=self.name, retryable=request_never_arrived(exc)) from exc

    async def _relay(self, response: UpstreamResponse, emit: Emit) -> None:
        """NDJSON lines -> events, as each upstream read brings them: `read_done` after each read's lines (so a
        relayed stream writes them to the client then, none held for a later read). A line split across reads
        waits for its end, as bytes (a character split across reads is decoded whole)."""
        lines = _NdjsonEvents(self.name)
        pending = b""
        async for piece in response.aiter_bytes():
            *complete, pending = (pending + piece).split(b"\n")
            for line in complete:
                for event in lines.feed(line):
                    await emit(event)
                if lines.done:
                    return
            await read_done(emit)
        for event in lines.feed(pending):  # a last line without its newline
            await emit(event)
        if not lines.done:
            raise UpstreamError(f"{self.name}: truncated stream (ended without done)", upstream=self.name)

    def _status_error(self, response: UpstreamResponse, model: str) -> UpstreamError:
        status = response.status_code
        detail = _error_text(response)
        retry_after = _retry_after(response)
        if status == 404 and "model" in detail.lower():
            return UpstreamError(f"{self.name}: {detail} (run `ollama pull {model}` on the Ollama host)",
                                 upstream=self.name, upstream_status=status)
        if status == 404:
            return UpstreamError(f"{self.name}: no Ollama /api/chat at {_where(self.base_url)} ({detail}); "
                                 "check the tier's base_url", upstream=self.name, upstream_status=status)
        if status == 429:
            return UpstreamRateLimited(f"{self.name}: Ollama is rate limiting: {detail}", upstream=self.name,
                                       upstream_status=status, retryable=True, retry_after=retry_after)
        if status >= 500:
            return UpstreamError(f"{self.name}: Ollama returned {status}: {detail}", upstream=self.name,
                                 upstream_status=status, retryable=True, retry_after=retry_after)
        return UpstreamError(f"{self.name}: Ollama rejected the request ({status}): {detail}",
                             upstream=self.name, upstream_status=status)


class _NdjsonEvents:
    """One Ollama stream's NDJSON lines -> neutral events. Ollama gives no tool call ids, so they are made here;
    `done` once the final line (`done: true`) was read."""

    __slots__ = ("done", "name", "tool_calls")

    def __init__(self, name: str) -> None:
        self.name = name
        self.tool_calls = 0
        self.done = False

    def feed(self, line: bytes) -> list[Event]:
        if not line.strip():
            return []
        chunk = _parse_line(line, self.name)
        if "error" in chunk:
            raise UpstreamError(f"{self.name}: Ollama error mid-stream: {chunk['error']}", upstream=self.name)
        events: list[Event] = []
        message = chunk.get("message") or {}
        content = message.get("content") or ""
        if content:
            logprob, tokens = _logprob_sum(chunk.get("logprobs"))
            events.append(TextDelta(content, logprob=logprob, tokens=tokens))
        elif message.get("thinking"):
            events.append(KeepAlive())  # a thinking model reasoning: alive, nothing to show
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments if arguments is not None else {})
            call_id = call.get("id") or f"call_{secrets.token_hex(6)}"
            events.append(ToolCallStart(index=self.tool_calls, id=call_id, name=function.get("name", "")))
            events.append(ToolCallDelta(index=self.tool_calls, arguments=arguments))
            self.tool_calls += 1
        if chunk.get("done"):
            self.done = True
            events.append(Finish(
                reason=_finish_reason(chunk.get("done_reason"), self.tool_calls > 0),
                usage=Usage(prompt_tokens=int(chunk.get("prompt_eval_count") or 0),
                            completion_tokens=int(chunk.get("eval_count") or 0)),
                model=chunk.get("model") or "",
            ))
        return events



def chat_body(request: ChatRequest, config: TierConfig, window: int | None = None) -> dict[str, Any]:
    """The /api/chat body for `request`: always streamed; logprobs asked for, they feed confidence; `num_ctx`
    sized to the request (local/context_fit.py), so Ollama never cuts the start of the prompt."""
    options = ollama_options(request, config)
    options["num_ctx"] = num_ctx(estimate_request_tokens(request), options.get("num_predict"), window)
    body: dict[str, Any] = {
        "model": config.model or request.model,
        "messages": ollama_messages(request.messages),
        "stream": True,
        "options": options,
        # Ollama servers older than logprobs support ignore the unknown field.
        "logprobs": True,
    }
    if request.sampling.get("top_logprobs") is not None:
        body["top_logprobs"] = int(request.sampling["top_logprobs"])
    if request.tools and request.sampling.get("tool_choice") != "none":
        body["tools"] = [ollama_tool(tool) for tool in request.tools]
    response_format = _format(request.sampling.get("response_format"))
    if response_format is not None:
        body["format"] = response_format
    if config.keep_alive:
        body["keep_alive"] = config.keep_alive
    return body


def context_length(show: Any) -> int | None:
    """The context length in an /api/show answer: `model_info["<general.architecture>.context_length"]`."""
    info = show.get("model_info") if isinstance(show, dict) else None
    if not isinstance(info, dict):
        return None
    arch = info.get("general.architecture")
    value = info.get(f"{arch}.context_length") if isinstance(arch, str) else None
    if not isinstance(value, int):
        value = next((v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)), None)
    return value if isinstance(value, int) and value > 0 else None


def ollama_options(request: ChatRequest, config: TierConfig) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if request.temperature is not None:
        options["temperature"] = request.temperature
    for key in SAME_NAME_OPTIONS:
        if request.sampling.get(key) is not None:
            options[key] = request.sampling[key]
    options["num_predict"] = request.max_tokens if request.max_tokens is not None else config.max_tokens
    if request.stop:
        options["stop"] = request.stop
    return options


def ollama_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages -> Ollama's: tool arguments as objects, images as base64, tool results named."""
    names_by_call_id: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.text()}
        images = _images(message)
        if images:
            item["images"] = images
        if message.tool_calls:
            item["tool_calls"] = []
            for call in message.tool_calls:
                names_by_call_id[call.id] = call.name
                item["tool_calls"].append(
                    {"id": call.id, "function": {"name": call.name, "arguments": _arguments(call.arguments)}})
        if message.role == "tool":
            tool_name = message.name or names_by_call_id.get(message.tool_call_id or "")
            if tool_name:
                item["tool_name"] = tool_name
        out.append(item)
    return out


def ollama_tool(tool: Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _images(message: Message) -> list[str]:
    if not isinstance(message.content, list):
        return []
    images: list[str] = []
    for part in message.content:
        if part.get("type") != "image":
            continue
        if part.get("data"):
            images.append(part["data"])
        elif str(part.get("url", "")).startswith("data:") and ";base64," in part["url"]:
            images.append(part["url"].split(";base64,", 1)[1])
        else:
            raise InvalidRequest("Ollama takes images only as inline base64 data, not as URLs",
                                 param="messages")
    return images


def _arguments(text: str) -> dict[str, Any]:
    """Ollama wants tool call arguments as a JSON object; text that is not one becomes {}."""
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _format(response_format: Any) -> str | dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return "json"
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else "json"
    return None


def _finish_reason(done_reason: str | None, had_tool_calls: bool) -> FinishReason:
    if had_tool_calls:
        return "tool_calls"
    return "length" if done_reason == "length" else "stop"


def _parse_line(line: bytes, name: str) -> dict[str, Any]:
    try:
        chunk = loads(line)
    except ValueError:  # not JSON, or not UTF-8
        chunk = None
    if not isinstance(chunk, dict):
        raise UpstreamError(f"{name}: malformed NDJSON from Ollama", upstream=name)
    return chunk


def _logprob_sum(entries: Any) -> tuple[float | None, int]:
    if not isinstance(entries, list) or not entries:
        return None, 0
    try:
        return sum(float(e["logprob"]) for e in entries), len(entries)
    except (KeyError, TypeError, ValueError):
        return None, 0


def _error_text(response: UpstreamResponse) -> str:
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])
    return response.text[:200].strip() or response.reason_phrase


def _retry_after(response: UpstreamResponse) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: leave the delay to the backoff


def _where(base_url: str) -> str:
    """host:port for messages: a base URL may carry credentials in its userinfo."""
    url = httpx.URL(base_url)
    return f"{url.host}:{url.port}" if url.port else url.host
