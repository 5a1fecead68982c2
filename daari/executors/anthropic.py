"""The Anthropic Messages executor: POST /v1/messages, decoded into neutral events, passed through natively.

- `base_url` may end with or without `/v1` (`https://api.anthropic.com` and `https://api.anthropic.com/v1`
  both work).
- Credentials: with `forward_client_key`, the client's own x-api-key (or else its Authorization) is sent,
  and a request with neither is refused with 401; otherwise `x-api-key` from `api_key_env`. Never both,
  never logged.
- An Anthropic client's allowlisted headers (`anthropic_wire.PASSTHROUGH_HEADERS`: betas, version, x-app,
  user-agent, session id) and its query string (Claude Code's `?beta=true`) reach the upstream unchanged.
- The prompt prefix stays cacheable (sessions/prefix.py): Claude Code's per-request billing block is left out for
  upstreams that are not Anthropic's own (`billing_block`); `cache_control.ttl` is kept unless the tier says
  `cache_ttl: strip`, or the upstream once refused it (a 400 naming `ttl`: sent again without, and from then on).
- An upstream that refuses a thinking block's signature (a 400 naming `signature`) gets the request once more
  without the thinking blocks daari cannot attribute to it (sessions/hygiene.py): a session that moved
  between providers outside daari's memory (a restart, an evicted record) keeps working.
- For a client that speaks Anthropic, every upstream stream event is emitted first as
  `NativeEvent("anthropic", name, data)` and then as the neutral events it stands for (pings are not
  emitted). A non-stream answer emits `NativeEvent("anthropic", "message", body)` before its neutral
  events, so thinking blocks and server tool results can reach the client untouched.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from daari.errors import Unauthorized, UpstreamError, UpstreamRejected, UpstreamUnavailable
from daari.executors.base import Emit
from daari.executors.http_upstream import (
    HttpUpstream,
    endpoint,
    request_never_arrived,
    response_started,
    retry_after_seconds,
)
from daari.executors.upstream_http import UpstreamResponse
from daari.protocol.anthropic_render import (
    AnthropicEventDecoder,
    decode_json,
    events_from_message,
    upstream_error,
)
from daari.protocol.anthropic_wire import PASSTHROUGH_HEADERS, SecretStr, to_upstream_body
from daari.protocol.chat import ChatRequest
from daari.protocol.events import NativeEvent
from daari.protocol.sse import SSEDecoder, SSEError
from daari.redact import scrub, url_secrets
from daari.sessions.hygiene import THINKING_BLOCKS, for_anthropic_upstream
from daari.sessions.prefix import has_cache_ttl, is_first_party, strip_billing_block, strip_cache_ttl

DEFAULT_ANTHROPIC_VERSION = "2023-06-01"
log = logging.getLogger("daari.upstream")


def messages_url(base_url: str, path: str = "/messages") -> str:
    """`path` under the Messages API root: `base_url` may end with or without `/v1`."""
    return endpoint(base_url, path if httpx.URL(base_url).path.rstrip("/").endswith("/v1") else "/v1" + path)


def _never_signed(key: str) -> str | None:
    return None


def refuses(err: UpstreamError, word: str) -> bool:
    """A 400 from the upstream whose message names `word` (its refusal of one field of the body)."""
    return isinstance(err, UpstreamRejected) and err.status == 400 and word in err.message.lower()


def has_thinking(body: dict[str, Any]) -> bool:
    return any(isinstance(m, dict) and isinstance(m.get("content"), list) and any(
        isinstance(b, dict) and b.get("type") in THINKING_BLOCKS for b in m["content"])
        for m in body.get("messages") or [])


class AnthropicExecutor(HttpUpstream):
    kind = "anthropic"
    supports_tools = True
    flushes_per_read = True  # `_generate`'s stream loop calls read_done (the emit's flush) after each read's events
    ttl_refused = False  # the upstream once answered 400 to a cache_control ttl: sent without from then on

    def shaped(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body with the prefix rewrites this upstream needs (billing block, ttl); the same object if none."""
        config = self.config
        if config.billing_block == "strip" or (config.billing_block == "auto" and not is_first_party(config.base_url)):
            body = strip_billing_block(body)
        if config.cache_ttl == "strip" or (config.cache_ttl == "auto" and self.ttl_refused):
            body = strip_cache_ttl(body)
        return body

    def headers(self, request: ChatRequest) -> dict[str, str]:
        """Upstream request headers. Holds a credential: never log the result."""
        client = request.passthrough_headers
        # The allowlist is for an Anthropic client's headers; an OpenAI client's user-agent is not Claude's.
        native = request.protocol == "anthropic"
        headers = {name: client[name] for name in PASSTHROUGH_HEADERS if native and client.get(name)}
        headers["content-type"] = "application/json"
        headers["anthropic-version"] = client.get("anthropic-version") or DEFAULT_ANTHROPIC_VERSION
        if self.config.forward_client_key and client.get("x-api-key"):
            headers["x-api-key"] = client["x-api-key"]
        elif self.config.forward_client_key and client.get("authorization"):
            headers["authorization"] = client["authorization"]
        elif self.config.forward_client_key:
            # The client pays on this tier: without its key nobody may spend the configured one.
            raise Unauthorized(f"tier {self.tier} forwards the client's own key (forward_client_key) and this "
                               "request carries none: send x-api-key or Authorization")
        elif key := self.config.api_key():
            headers["x-api-key"] = SecretStr(key)
        return headers

    def url(self, request: ChatRequest, *, count_tokens: bool = False) -> str:
        base = self.config.base_url or ""
        url = messages_url(base, "/messages/count_tokens" if count_tokens else "/messages")
        if request.protocol == "anthropic" and request.query_string:
            return f"{url}{'&' if '?' in url else '?'}{request.query_string}"
        return url

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        body = self.shaped(to_upstream_body(request, self.config.model or request.model, request.stream,
                                            translate_options=self.config.translate_options))
        retried: set[str] = set()
        while True:
            try:
                await self._generate(request, body, emit)
                return
            except UpstreamRejected as err:
                if "ttl" not in retried and refuses(err, "ttl") and has_cache_ttl(body) and \
                        self.config.cache_ttl == "auto":
                    log.warning("upstream %s refused cache_control.ttl: sending it without ttl from now on",
                                self.name)
                    self.ttl_refused = True
                    body, retried = strip_cache_ttl(body), retried | {"ttl"}
                    continue
                if "signature" not in retried and refuses(err, "signature") and has_thinking(body):
                    log.warning("upstream %s refused a thinking block's signature: sending the request again "
                                "without the thinking blocks it did not sign", self.name)
                    body = for_anthropic_upstream(body, "", _never_signed, drop_unknown=True).body
                    retried |= {"signature"}
                    continue
                raise

    async def _generate(self, request: ChatRequest, body: dict[str, Any], emit: Emit) -> None:
        headers = self.headers(request)
        url = self.url(request)
        native = request.protocol == "anthropic"
        try:
            async with self.http().stream("POST", url, json=body, headers=headers) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise self._http_error(response, headers)
                # Accepted: the body (a whole message may take the whole generation) is under idle/total.
                await response_started(emit)
                if request.stream:
                    # The relay's loop is here, not in a method of its own: every coroutine frame between the
                    # request's task and the upstream socket is resumed at each wait on it (each read of a stream).
                    sse = SSEDecoder()
                    decoder = AnthropicEventDecoder()
                    # An event the emit takes at once costs no coroutine (`nowait`), and the read's end is the
                    # emit's `flush` itself (`read_done` without its frame): per upstream read and event. The
                    # decoders' methods are bound once, not looked up per read and event.
                    put = getattr(emit, "nowait", None)
                    flush = getattr(emit, "flush", None)
                    feed_bytes, decode = sse.feed_bytes, decoder.feed
                    async for chunk in response.aiter_bytes():
                        try:
                            items = feed_bytes(chunk)
                        except SSEError as exc:
                            raise UpstreamError(f"upstream {self.name}: {exc}", upstream=self.name) from None
                        for item in items:
                            data = decode_json(item.data)
                            name = item.event or str(data.get("type") or "")
                            if native and name not in ("ping", "error"):
                                native_event = NativeEvent("anthropic", name, data)
                                if put is None or not put(native_event):
                                    await emit(native_event)
                            for event in decode(name, data):
                                if put is None or not put(event):
                                    await emit(event)
                            if decoder.finished:
                                return
                        if flush is not None:
                            await flush()  # read_done
                    raise UpstreamError(f"truncated stream from {self.name}: it ended without message_stop",
                                        upstream=self.name)
                await response.aread()
            message = decode_json(response.text)
            events = events_from_message(message)
            if native:
                await emit(NativeEvent("anthropic", "message", message))
            for event in events:
                await emit(event)
        except UpstreamError as exc:
            exc.upstream = exc.upstream or self.name
            raise
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise UpstreamUnavailable(f"cannot connect to {self.name}: {type(exc).__name__}",
                                      upstream=self.name, retryable=True) from None
        except httpx.TransportError as exc:
            # Retried only if the request never reached Anthropic: once sent, it may be generating (and billed).
            raise UpstreamError(f"connection to {self.name} failed: {type(exc).__name__}", upstream=self.name,
                                retryable=request_never_arrived(exc)) from None

    async def count_tokens(self, request: ChatRequest) -> bytes:
        """POST the client's count_tokens body (only `model` replaced when the tier names one) to the
        upstream's /v1/messages/count_tokens with the same headers and key rules as messages; the upstream's
        JSON answer, byte for byte. A non-200 answer raises as for messages (`_http_error`), a transport
        failure `UpstreamUnavailable`."""
        body = self.shaped(dict(request.raw))  # counted as it would be sent
        body["model"] = self.config.model or body.get("model") or request.model
        headers = self.headers(request)  # Unauthorized for a keyless request to a forwarding tier
        try:
            response = await self.http().post(self.url(request, count_tokens=True), json=body, headers=headers)
        except httpx.TransportError as exc:
            raise UpstreamUnavailable(f"count_tokens on {self.name} failed: {type(exc).__name__}",
                                      upstream=self.name, retryable=True) from None
        if response.status_code != 200:
            raise self._http_error(response, headers)
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("input_tokens"), int):
            raise UpstreamError(f"count_tokens on {self.name}: the answer has no input_tokens", upstream=self.name)
        return response.content

    def _http_error(self, response: UpstreamResponse, headers: dict[str, str]) -> UpstreamError:
        try:
            payload: object = response.json()
        except ValueError:
            payload = None
        err = upstream_error(payload, status=response.status_code,
                             retry_after=retry_after_seconds(response.headers))
        echoed = [s for s in (headers.get("x-api-key"), headers.get("authorization")) if s]
        # An upstream that echoes the credential (or the base URL's) must not leak it.
        err.message = scrub(err.message, [*echoed, *url_secrets(self.config.base_url)])
        err.args = (err.message,)
        err.upstream = self.name
        return err
