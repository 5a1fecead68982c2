"""The executor for OpenAI-compatible upstreams (OpenAI, vLLM, llama.cpp, Ollama's /v1, LM Studio...).

HTTP failures map onto daari's errors: 429 -> UpstreamRateLimited, 5xx and 408 -> UpstreamError (both
retryable), 401/403 -> UpstreamError 502 (daari's own key is wrong: passing 401 on would tell the client its
key is bad), other 4xx -> UpstreamRejected carrying the upstream's status and message, connection refused ->
UpstreamUnavailable. Read timeouts belong to the generic wrapper around executors; only connect is bounded.

Credentials: with `forward_client_key`, the client's own `Authorization` is sent (Codex, aider and SDK users
keep their key in the client), and a request without one is refused with 401; otherwise `Bearer` + the key
from `api_key_env`. Never both, never logged, redacted from upstream error messages.
Client headers: an OpenAI or Responses client's allowlisted headers (`openai_headers.PASSTHROUGH_HEADERS`:
Codex's user-agent, originator, version, session ids, OpenAI-Beta, OpenAI-Organization/Project...) reach the
upstream as sent; daari's content-type, accept and credential win over anything of the same name.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from daari.errors import (
    Unauthorized,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from daari.executors.base import Emit
from daari.executors.http_upstream import (
    HttpUpstream,
    endpoint_url,
    request_never_arrived,
    response_started,
    retry_after_seconds,
)
from daari.executors.upstream_http import UpstreamResponse
from daari.jsonio import dumps, loads
from daari.local.tool_repair import repairing, repairs_tools
from daari.protocol.anthropic_wire import SecretStr, system_role_refusal
from daari.protocol.chat import ChatRequest
from daari.protocol.openai_headers import forwarded_headers
from daari.protocol.openai_render import ChunkDecoder, events_from_response
from daari.protocol.openai_wire import to_upstream_body
from daari.protocol.sse import SSEDecoder, SSEError, loads_data
from daari.redact import redact_url, scrub, url_secrets

_KEY_LIKE = re.compile(r"\b(sk-|sk_|key-)[A-Za-z0-9_\-*]{6,}")
_MESSAGE_LIMIT = 500


def redact(text: str, key: str | None, base_url: str | None = None) -> str:
    """The text without the key, the base URL's credentials, nor anything shaped like a key (upstreams echo
    keys in 401 messages)."""
    if key:
        text = text.replace(key, "***")
    return _KEY_LIKE.sub(r"\1***", scrub(text, url_secrets(base_url)))


def upstream_message(body: bytes) -> str:
    """The human message of an upstream error body: OpenAI's error.message, Ollama's error, or the text."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:_MESSAGE_LIMIT]
        for value in (error, data.get("message"), data.get("detail")):
            if isinstance(value, str):
                return value[:_MESSAGE_LIMIT]
    text = body.decode("utf-8", "replace").strip()
    return text[:_MESSAGE_LIMIT] or "no message"


class OpenAIExecutor(HttpUpstream):
    kind = "openai"
    supports_tools = True
    flushes_per_read = True  # `_generate_stream` calls read_done (the emit's flush) after each read's events

    @property
    def repairs(self) -> bool:
        return repairs_tools(self.config)

    @property
    def url(self) -> httpx.URL:
        return endpoint_url(self.config.base_url or "", "/chat/completions")

    def status(self) -> dict[str, Any]:
        return {"base_url": redact_url(self.config.base_url or ""), "model": self.config.model,
                "started": self.started, "api_key_set": bool(self.config.api_key())}

    def _headers(self, request: ChatRequest | None = None) -> dict[str, str]:
        """Upstream request headers. Holds a credential: never log the result."""
        headers = forwarded_headers(request.protocol, request.passthrough_headers) if request is not None else {}
        headers.update({"content-type": "application/json", "accept": "application/json, text/event-stream"})
        forwarded = request.passthrough_headers.get("authorization") if request is not None else None
        key = self.config.api_key()
        if self.config.forward_client_key and forwarded:
            headers["authorization"] = SecretStr(forwarded)
        elif self.config.forward_client_key and request is not None:
            # The client pays on this tier: without its key nobody may spend the configured one.
            raise Unauthorized(f"tier {self.tier} forwards the client's own key (forward_client_key) and this "
                               "request carries none: send Authorization: Bearer")
        elif key:
            headers["authorization"] = SecretStr(f"Bearer {key}")
        return headers

    def _error(self, cls: type[UpstreamError], message: str, **kw: Any) -> UpstreamError:
        return cls(redact(message, self.config.api_key(), self.config.base_url), upstream=self.name, **kw)

    def _http_error(self, response: UpstreamResponse) -> UpstreamError:
        status = response.status_code
        head = f"upstream {self.name}"
        detail = upstream_message(response.content)
        if status == 429:
            return self._error(UpstreamRateLimited, f"{head} rate limited the request: {detail}",
                               upstream_status=status, retryable=True,
                               retry_after=retry_after_seconds(response.headers))
        if status >= 500 or status == 408:
            return self._error(UpstreamError, f"{head} failed with HTTP {status}: {detail}",
                               upstream_status=status, retryable=True)
        if status in (401, 403):
            return self._error(UpstreamError, f"{head} refused daari's credentials (HTTP {status}; check the "
                               f"tier's api_key_env): {detail}", upstream_status=status)
        if 400 <= status < 500:
            return self._error(UpstreamRejected, f"{head} rejected the request: {detail}", status=status)
        return self._error(UpstreamError, f"{head} answered HTTP {status}", upstream_status=status)

    def _transport_error(self, exc: httpx.TransportError, started: bool) -> UpstreamError:
        """A network failure: retried only when the request never reached the upstream (it cannot be
        generating); once sent, a retry could pay for the answer twice."""
        what = type(exc).__name__
        if isinstance(exc, httpx.ConnectTimeout):
            return self._error(UpstreamTimeout, f"upstream {self.name}: connect timed out", retryable=True)
        if isinstance(exc, httpx.ConnectError):
            return self._error(UpstreamUnavailable, f"upstream {self.name} is unreachable ({what})",
                               retryable=True)
        if started:
            return self._error(UpstreamError, f"upstream {self.name} broke off the response ({what})")
        return self._error(UpstreamError, f"upstream {self.name} failed before answering ({what})",
                           retryable=request_never_arrived(exc))

    def _named(self, err: UpstreamError) -> UpstreamError:
        err.upstream = err.upstream or self.name
        err.message = f"upstream {self.name}: {redact(err.message, self.config.api_key(), self.config.base_url)}"
        err.args = (err.message,)
        return err

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        body = to_upstream_body(request, self.config.model or request.model, request.stream,
                                translate_options=self.config.translate_options)
        headers = self._headers(request)
        emit = repairing(request, emit, self.repairs)  # a local server's model writing tool calls as text
        try:
            if request.stream:
                await self._generate_stream(body, headers, emit)
            else:
                await self._generate_whole(body, headers, emit)
        except UpstreamError as err:
            forwarded = headers.get("authorization", "")
            if forwarded and forwarded.removeprefix("Bearer ") in err.message:  # an upstream echoing the key
                err.message = err.message.replace(forwarded.removeprefix("Bearer "), "***")
                err.args = (err.message,)
            if not err.upstream:
                err = self._named(err)
            if isinstance(err, UpstreamRejected) and (refusal := system_role_refusal(request, err.message)):
                err.message = refusal  # Claude Code then retries without mid-conversation system messages
                err.args = (refusal,)
            raise err from None

    async def _generate_whole(self, body: dict[str, Any], headers: dict[str, str], emit: Emit) -> None:
        started = False
        try:
            async with self.http().stream("POST", self.url, content=dumps(body),
                                          headers=headers) as response:
                started = True
                if response.status_code == 200:
                    await response_started(emit)  # the body may take the whole generation: idle/total now
                await response.aread()
        except httpx.TransportError as exc:
            raise self._transport_error(exc, started) from None
        if response.status_code != 200:
            raise self._http_error(response)
        await self._emit_whole(response, emit)

    async def _emit_whole(self, response: UpstreamResponse, emit: Emit) -> None:
        """A whole `chat.completion` body (read already) as events."""
        try:
            data = loads(response.content)
        except ValueError:
            raise self._error(UpstreamError, f"upstream {self.name} sent a body that is not JSON",
                              upstream_status=200) from None
        for event in events_from_response(data):
            await emit(event)

    async def _generate_stream(self, body: dict[str, Any], headers: dict[str, str], emit: Emit) -> None:
        """The SSE body decoded as it arrives and its events emitted; a finish_reason required. The relay's loop is
        here, not in a method of its own: every coroutine frame between the request's task and the upstream
        socket is resumed at each wait on it (each read of a relayed stream)."""
        started = False
        try:
            async with self.http().stream("POST", self.url, content=dumps(body),
                                          headers=headers) as response:
                started = True
                if response.status_code != 200:
                    await response.aread()
                    raise self._http_error(response)
                await response_started(emit)
                if response.headers.get("content-type", "").startswith("application/json"):
                    # A server that ignores "stream": the whole answer in one JSON body.
                    await response.aread()
                    await self._emit_whole(response, emit)
                    return
                sse = SSEDecoder()
                chunks = ChunkDecoder()
                # An event the emit takes at once costs no coroutine (`nowait`), and the read's end is the emit's
                # `flush` itself (`read_done` without its frame): per upstream read and event, on a relayed
                # stream's hot path. The decoders' methods are bound once, not looked up per read and event.
                put = getattr(emit, "nowait", None)
                flush = getattr(emit, "flush", None)
                feed_bytes, decode = sse.feed_bytes, chunks.feed
                async for raw in response.aiter_bytes():
                    try:
                        events = feed_bytes(raw)
                    except SSEError as exc:
                        raise self._error(UpstreamError, f"upstream {self.name}: {exc}") from None
                    for event in events:
                        data = event.data
                        if data[:1] != b"{":  # not a chunk: a keep-alive, [DONE], or not JSON (as text, as read)
                            text = data.decode("utf-8", errors="replace").strip()
                            if not text:  # a keep-alive with an empty data line
                                continue
                            if text == "[DONE]":
                                for ev in chunks.end():
                                    await emit(ev)
                                return
                        try:
                            value = loads_data(data)
                        except ValueError:
                            raise self._error(UpstreamError, f"upstream {self.name} sent a stream event that is "
                                              "not JSON") from None
                        for ev in decode(value):
                            if put is None or not put(ev):
                                await emit(ev)
                    if flush is not None:
                        await flush()  # read_done
                for ev in chunks.end():
                    await emit(ev)
        except httpx.TransportError as exc:
            raise self._transport_error(exc, started) from None
