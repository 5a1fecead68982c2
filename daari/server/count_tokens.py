"""`POST /v1/messages/count_tokens`: the Anthropic upstream's own count when a tier speaks Anthropic, else
daari's estimate, marked with the response header `x-daari-estimate: true` (docs/agents.md).

Which upstream counts: the tier holding the session's provider cache when it speaks Anthropic (where the
session's turns go), else the first configured tier, in escalation order, whose executor is `anthropic` (the
tier Claude Code's agent turns reach in a usual set-up). It counts the body as that upstream would receive it
(thinking blocks of other providers left out, billing block and ttl as the tier sends them). The estimate is
calibrated by what upstreams reported for the session (sessions/count.py). Passed on to the client, in Anthropic's
shape: a keyless request to a `forward_client_key` tier (401, as for messages) and the upstream's 4xx about
the request (400, 401, 403, 413...). Answered with the estimate instead: no Anthropic tier, the upstream
unreachable or timing out (the tier's `first_byte_s`), its circuit open, its 5xx/529, 429 and 408, a 404/405
(an Anthropic-compatible upstream without this endpoint), an answer without `input_tokens`, daari busy.
"""

from __future__ import annotations

import logging

import trio

from actors.executor import CountTokens
from actors.runtime import Address
from daari.config import Config
from daari.errors import DaariError, Unauthorized, UpstreamRejected
from daari.pipeline.body_work import BodyWork, decode_json
from daari.pipeline.side_query import Shield
from daari.protocol import anthropic_wire
from daari.protocol.chat import ChatRequest
from daari.protocol.tokens import estimate_request_tokens
from daari.server.asgi_io import ClientDisconnected, read_body, send_json, watch_disconnect
from daari.server.http_request import HttpRequest
from daari.server.limits import RequestLimits
from daari.sessions.count import calibrated_count
from daari.sessions.hygiene import for_anthropic_upstream
from daari.sessions.identity import session_key
from daari.sessions.store import SessionStore

log = logging.getLogger("daari.server")

ESTIMATE_HEADER = "x-daari-estimate"
# Upstream statuses that say "this upstream cannot count now", not "the request is wrong".
FALLBACK_STATUSES = frozenset({404, 405, 408, 429})


def counting_tier(config: Config) -> str | None:
    """The tier whose upstream counts tokens: the first configured one with executor anthropic."""
    return next((t for t in config.configured_tiers() if config.tiers[t].executor == "anthropic"), None)


def passed_on(err: DaariError) -> bool:
    """True when the client must see this error (its request or its key is wrong); False: estimate instead."""
    if isinstance(err, Unauthorized):
        return True
    return isinstance(err, UpstreamRejected) and err.status not in FALLBACK_STATUSES


class CountTokensRoute:
    def __init__(self, config: Config, executor: Address, body_work: BodyWork, sessions: SessionStore | None = None,
                 providers: dict[str, str] | None = None, shield: Shield | None = None) -> None:
        self.tier = counting_tier(config)
        self.shield = shield  # secrets redacted for a remote counting tier (docs/privacy.md): counts stay close
        self.anthropic_tiers = frozenset(t for t in config.configured_tiers()
                                         if config.tiers[t].executor == "anthropic")
        self.executor = executor
        self.body_work = body_work  # a large body is decoded and validated off the event loop, as for chat
        self.sessions = sessions
        self.providers = providers or {}  # tier -> provider id, whose thinking blocks it accepts
        self.limits = RequestLimits.from_config(config.server)  # the body's size (decompressed too) and deadline

    async def __call__(self, req: HttpRequest) -> None:
        raw = await read_body(req.receive, req.headers, self.limits)
        request = await self._parse(raw, req)  # a bad body: 400, Anthropic's shape
        request.query_string = req.query_string
        state = self.sessions.get(session_key(request, req.headers)) if self.sessions is not None else None
        home = state.home.tier if state is not None and state.home is not None else None
        tier = home if home in self.anthropic_tiers else self.tier
        if tier is not None:
            sent = self._as_sent(request, tier)
            answer = await self._ask_upstream(req, tier, self.shield(tier, sent) if self.shield else sent)
            if answer is not None:
                await req.send({"type": "http.response.start", "status": 200,
                                "headers": [(b"content-type", b"application/json")]})
                await req.send({"type": "http.response.body", "body": answer, "more_body": False})
                return
        ratio = self.sessions.ratio if self.sessions is not None else 1.0
        count = calibrated_count(estimate_request_tokens(request), state, ratio)
        await send_json(req.send, 200, {"input_tokens": count}, {ESTIMATE_HEADER: "true"})

    def _as_sent(self, request: ChatRequest, tier: str) -> ChatRequest:
        """The body as `tier`'s upstream would receive it: other providers' thinking blocks left out."""
        if self.sessions is None or not request.raw:
            return request
        cleaned = for_anthropic_upstream(request.raw, self.providers.get(tier, tier), self.sessions.producer)
        if not cleaned.changed:
            return request
        request.raw = cleaned.body
        return request

    async def _parse(self, raw: bytes, req: HttpRequest) -> ChatRequest:
        work = self.body_work
        if not work.heavy(len(raw)):
            return anthropic_wire.parse_count_tokens_request(decode_json(raw), req.headers)
        body = await work.run(decode_json, raw)
        return await work.run(anthropic_wire.parse_count_tokens_request, body, req.headers)

    async def _ask_upstream(self, req: HttpRequest, tier: str, request: ChatRequest) -> bytes | None:
        """The upstream's answer, or None to fall back to the estimate; raises what the client must see."""
        answer: bytes | None = None
        failure: DaariError | None = None
        async with trio.open_nursery() as nursery:  # a client that leaves cancels the call, which ends the upstream's
            nursery.start_soon(watch_disconnect, req.receive, nursery.cancel_scope)
            try:
                answer = await self.executor.call_or_shed(CountTokens(tier, request))
            except DaariError as err:  # daari busy, the executor actor down, or the upstream failed
                failure = err
            nursery.cancel_scope.cancel()
        if failure is not None:
            if passed_on(failure):
                raise failure
            log.info("count_tokens: tier %s did not count (%s); answering with the estimate", tier,
                     type(failure).__name__)
            return None
        if answer is None:
            raise ClientDisconnected("the client left during count_tokens")
        return answer
