"""`POST /v1/responses/compact` and `POST /v1/responses/input_tokens`: the Responses API's endpoints beside
`/v1/responses` (docs/agents.md, "Compaction and input tokens").

Both reach the first configured Responses tier (executor openai, wire_api responses; escalation order) as the
client sent them (`previous_response_id` replaced by the stored history, as for /v1/responses), and its
answer reaches the client byte for byte, status included. Without such a tier:
- compact is a 400 `invalid_request_error` (code `unsupported_by_upstream`): only the provider that made a
  conversation's encrypted items can compact it into one. A 400 is the answer on which Codex falls back to
  compacting locally (a summarizing turn through /v1/responses, which every tier serves); and Codex with
  daari as its own model provider (docs/agents.md) never calls this endpoint: it compacts locally.
- input_tokens is daari's estimate (about 4 characters a token) in OpenAI's shape, with the response header
  `x-daari-estimate: true`, as for Anthropic's count_tokens.
A body without `model` is a 400 for compact (the API requires it); a malformed body a 400 naming the field.
A compaction is a billed model call: its usage is spend (purpose `compact`, docs/budget.md), counted to the
caller's project, client and session once the answer is handed over, whatever happens to the client.
"""

from __future__ import annotations

from typing import Any

import trio

from actors.executor import ForwardResponses
from actors.runtime import Address
from daari.budget.payer import Payer, SideSpend
from daari.budget.project import NO_PROJECT, project_of
from daari.cache.partition import cache_partition
from daari.config import Config
from daari.errors import InvalidRequest, UpstreamUnavailable
from daari.jsonio import loads
from daari.pipeline.body_work import decode_json
from daari.pipeline.client_family import client_family
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event, Finish
from daari.protocol.responses_decode import response_usage
from daari.protocol.responses_wire import parse_responses_request
from daari.protocol.tokens import estimate_request_tokens
from daari.responses.history import previous_not_found, with_history
from daari.responses.store import ResponseArchive
from daari.server.asgi_io import read_body, send_json
from daari.server.http_request import HttpRequest
from daari.server.limits import RequestLimits
from daari.sessions.identity import session_key

ESTIMATE_HEADER = "x-daari-estimate"


def responses_tier(config: Config) -> str | None:
    """The first configured tier, in escalation order, whose upstream speaks the Responses API."""
    return next((t for t in config.configured_tiers()
                 if config.tiers[t].executor == "openai" and config.tiers[t].wire_api == "responses"), None)


async def _send_raw(req: HttpRequest, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    raw = [(b"content-type", b"application/json"),
           *((k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items())]
    await req.send({"type": "http.response.start", "status": status, "headers": raw})
    await req.send({"type": "http.response.body", "body": body, "more_body": False})


def compaction_events(answer: bytes) -> list[Event]:
    """A compaction answer as the events spend is counted from: its reported usage (none: estimated)."""
    try:
        body = loads(answer)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return [Finish("stop")]
    try:
        usage = response_usage(body)
    except Exception:  # malformed counts: estimated like an answer without usage
        return [Finish("stop")]
    model = body.get("model")
    return [Finish("stop", usage, model=model if isinstance(model, str) else "")]


async def _payer(req: HttpRequest, request: ChatRequest) -> Payer:
    header = req.headers.get("x-daari-repo")
    project = await trio.to_thread.run_sync(project_of, header) if header else NO_PROJECT
    return Payer(project, client_family(req.headers.get("user-agent")), session_key(request, req.headers))


class ResponsesEndpoints:
    def __init__(self, config: Config, executor: Address, archive: ResponseArchive | None,
                 partition_secret: bytes | None, spend: SideSpend | None = None) -> None:
        self.tier = responses_tier(config)
        self.spend = spend  # a compaction is billed: SpendRecorder.side
        self.executor = executor
        self.archive = archive
        self.partition_secret = partition_secret
        self.limits = RequestLimits.from_config(config.server)  # the body's size (decompressed too) and deadline

    async def _request(self, req: HttpRequest, require_model: bool) -> ChatRequest:
        body: Any = decode_json(await read_body(req.receive, req.headers, self.limits))
        if require_model and (not isinstance(body, dict) or not isinstance(body.get("model"), str)
                              or not body["model"]):
            raise InvalidRequest("'model' is required", param="model")
        if isinstance(body, dict) and isinstance(body.get("previous_response_id"), str):
            previous_id = body["previous_response_id"]
            partition = cache_partition(self.partition_secret, req.headers)
            previous = await self.archive.get(previous_id, partition) if self.archive is not None else None
            if previous is None:
                raise previous_not_found(previous_id)
            body = {k: v for k, v in with_history(body, previous).items() if k != "previous_response_id"}
        return parse_responses_request(body, req.headers)

    async def compact(self, req: HttpRequest) -> None:
        request = await self._request(req, require_model=True)
        if self.tier is None:
            raise InvalidRequest(
                "POST /v1/responses/compact needs an upstream speaking the OpenAI Responses API (a tier with "
                "executor: openai and wire_api: responses), and none is configured: compact the conversation "
                "locally (send a summarizing turn to /v1/responses).", code="unsupported_by_upstream")
        tier = self.tier
        status, answer = await self.executor.call(ForwardResponses(tier, "/responses/compact", request))
        try:
            await _send_raw(req, status, answer)
        finally:
            if self.spend is not None and 200 <= status < 300:
                with trio.CancelScope(shield=True):  # billed whether or not the client stayed for the answer
                    await self.spend("compact", await _payer(req, request), tier, request, compaction_events(answer))

    async def input_tokens(self, req: HttpRequest) -> None:
        request = await self._request(req, require_model=False)
        if self.tier is not None:
            try:
                status, answer = await self.executor.call(
                    ForwardResponses(self.tier, "/responses/input_tokens", request))
            except UpstreamUnavailable:
                pass  # the upstream cannot count now: the estimate below
            else:
                if status not in (404, 405) and status < 500:  # an upstream without the endpoint: the estimate
                    await _send_raw(req, status, answer)
                    return
        await send_json(req.send, 200, {"object": "response.input_tokens",
                                        "input_tokens": estimate_request_tokens(request)},
                        {ESTIMATE_HEADER: "true"})
