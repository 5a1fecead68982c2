"""The executor for upstreams that speak OpenAI's Responses API (`executor: openai`, `wire_api: responses`):
POST {base_url}/responses, stream or not.

A Responses client's body passes through as it came (custom/freeform tools, reasoning items with
encrypted_content, include, prompt_cache_key, future fields), with only `model` and `stream` set by daari;
the upstream's events are emitted as `NativeEvent("responses", ...)` before the neutral events they stand
for, so the client gets them untouched. Requests from chat-completions and Anthropic clients are
translated (`responses_wire.to_responses_body`) and decoded back (`responses_decode`). Credentials, error
mapping and retries are the openai executor's.
"""

from __future__ import annotations

from typing import Any

import httpx

from daari.errors import UpstreamError
from daari.executors.base import Emit, read_done
from daari.executors.http_upstream import endpoint_url, response_started
from daari.executors.openai_compat import OpenAIExecutor
from daari.executors.upstream_http import UpstreamResponse
from daari.jsonio import dumps, loads
from daari.protocol.chat import ChatRequest
from daari.protocol.events import NativeEvent
from daari.protocol.responses_decode import ResponsesEventDecoder, events_from_response
from daari.protocol.responses_wire import to_responses_body
from daari.protocol.sse import SSEDecoder, encode

NATIVE = "responses"


class OpenAIResponsesExecutor(OpenAIExecutor):
    kind = "openai_responses"

    @property
    def url(self) -> httpx.URL:
        return endpoint_url(self.config.base_url or "", "/responses")

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        body = to_responses_body(request, self.config.model or request.model, request.stream)
        headers = self._headers(request)
        native = request.protocol == NATIVE
        try:
            await self._post(body, headers, emit, native, request.stream)
        except UpstreamError as err:
            forwarded = headers.get("authorization", "")
            if forwarded and forwarded.removeprefix("Bearer ") in err.message:  # an upstream echoing the key
                err.message = err.message.replace(forwarded.removeprefix("Bearer "), "***")
                err.args = (err.message,)
            if err.upstream:
                raise
            raise self._named(err) from None

    async def forward(self, path: str, request: ChatRequest) -> tuple[int, bytes]:
        """POST the client's body to {base_url}{path} as sent (only `model` set, when the tier names one), with
        the same headers and key rules as /responses; the upstream's status and body, byte for byte."""
        body = dict(request.raw)
        if self.config.model:
            body["model"] = self.config.model
        headers = self._headers(request)  # Unauthorized for a keyless request to a forwarding tier
        try:
            response = await self.http().post(endpoint_url(self.config.base_url or "", path), content=dumps(body),
                                              headers=headers)
        except httpx.TransportError as exc:
            raise self._transport_error(exc, False) from None
        return response.status_code, response.content

    async def _post(self, body: dict[str, Any], headers: dict[str, str], emit: Emit, native: bool,
                    stream: bool) -> None:
        started = False
        try:
            async with self.http().stream("POST", self.url, content=dumps(body), headers=headers) as response:
                started = True
                if response.status_code != 200:
                    await response.aread()
                    raise self._http_error(response)
                await response_started(emit)  # the body may take the whole generation: idle/total now
                if not stream or response.headers.get("content-type", "").startswith("application/json"):
                    await response.aread()
                    await self._whole(response, emit, native)
                    return
                await self._relay_events(response, emit, native)
        except httpx.TransportError as exc:
            raise self._transport_error(exc, started) from None

    async def _whole(self, response: UpstreamResponse, emit: Emit, native: bool) -> None:
        try:
            data = loads(response.content)
        except ValueError:
            raise self._error(UpstreamError, f"upstream {self.name} sent a body that is not JSON",
                              upstream_status=200) from None
        events = events_from_response(data)
        if native:
            await emit(NativeEvent(NATIVE, "response", data))
        for event in events:
            await emit(event)

    async def _relay_events(self, response: UpstreamResponse, emit: Emit, native: bool) -> None:
        sse = SSEDecoder()
        decoder = ResponsesEventDecoder()
        async for raw in response.aiter_bytes():
            for item in sse.feed(raw):
                if not item.data.strip() or item.data.strip() == "[DONE]":
                    continue
                try:
                    data = loads(item.data)
                except ValueError:
                    raise self._error(UpstreamError, f"upstream {self.name} sent a stream event that is not "
                                      "JSON") from None
                if not isinstance(data, dict):
                    raise self._error(UpstreamError, f"upstream {self.name} sent a stream event that is not "
                                      "an object")
                name = str(data.get("type") or item.event or "")
                events = decoder.feed(name, data)  # raises on response.failed / error before passing it on
                if native:  # with the event as sent, so the client can get it byte for byte
                    await emit(NativeEvent(NATIVE, name, data, encode(item.data, event=item.event)))
                for event in events:
                    await emit(event)
                if decoder.finished:
                    return
            await read_done(emit)  # flushes_per_read, from OpenAIExecutor
        raise self._error(UpstreamError, f"truncated stream from {self.name}: it ended without "
                          "response.completed")
