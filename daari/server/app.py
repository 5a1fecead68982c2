"""The ASGI app: the guard, the route table and protocol-shaped errors.

Every route answers in its protocol's own error shape (Anthropic for /v1/messages*, OpenAI elsewhere);
nothing escapes as a 500 with a traceback. The routes are objects the composition root (server/compose.py)
built once, each with what it uses; this module only guards and dispatches.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from actors.hub import Hub
from daari.errors import DaariError, MethodNotAllowed, NotFound
from daari.jsonio import dumps
from daari.metrics import Metrics
from daari.pipeline.decision import RoutingDecision
from daari.pipeline.record import DecisionRecorder
from daari.protocol.wire import OPENAI
from daari.server import guard
from daari.server.asgi_io import ClientDisconnected, Receive, Scope, Send, answer_lifespan, header_map, send_json
from daari.server.http_request import HttpRequest
from daari.server.limits import RequestLimits, check_head
from daari.server.refusals import record_refusal

log = logging.getLogger("daari.server")

Handler = Callable[[HttpRequest], Awaitable[None]]
# Websocket routes (the live tail): each runs only after `guard.check_websocket` passed.
WebsocketHandler = Callable[[Scope, Receive, Send], Awaitable[None]]
Methods = Mapping[str, Handler]


@dataclass(frozen=True)
class Routes:
    exact: Mapping[str, Methods]  # path (no trailing slash) -> method -> handler
    prefixed: Sequence[tuple[tuple[str, ...], Methods]]  # path prefixes, tried in order after `exact`
    chat: frozenset[Handler]  # the handlers whose every request ends in a RoutingDecision
    websocket: Mapping[str, WebsocketHandler]

    def find(self, path: str) -> Methods | None:
        methods = self.exact.get(path)
        if methods is not None:
            return methods
        for prefixes, found in self.prefixed:
            if path.startswith(prefixes):
                return found
        return None


class DaariApp:
    def __init__(self, routes: Routes, policy: guard.GuardPolicy, decisions: Hub[RoutingDecision],
                 metrics: Metrics, limits: RequestLimits) -> None:
        self.routes = routes
        self.policy = policy
        self.limits = limits  # header fields and bytes, checked before the guard (server/limits.py)
        self.decisions = decisions  # a chat request the guard refuses is still a routing decision
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        req = HttpRequest(scope, receive, send)
        cors = guard.cors_headers(self.policy, req.headers)
        if cors:
            req.send = _adding_headers(send, cors)
        try:
            if guard.is_preflight(scope["method"], req.headers):
                await self._preflight(req)
                return
            path = req.path.rstrip("/") or "/"
            try:
                check_head(scope["headers"], self.limits)
                guard.check_http(self.policy, scope["method"], req.headers, _page_token(scope))
            except DaariError as err:
                found = self.routes.find(path)
                if found is not None and found.get(scope["method"]) in self.routes.chat:
                    DecisionRecorder(self.decisions, req.wire.name, req.headers).refused(
                        err, req.wire.render_error(err)[0])  # a refused chat request is a decision
                    req.decision_logged = True
                raise
            req.headers = guard.without_token(self.policy, req.headers)
            methods = self.routes.find(path)
            if methods is None:
                raise NotFound(f"no route for {scope['method']} {req.path}")
            handler = methods.get(scope["method"])
            if handler is None:
                await self._error(req, MethodNotAllowed(f"{scope['method']} is not allowed on {req.path}; "
                                                        f"use {', '.join(methods)}"), {"allow": ", ".join(methods)})
                return
            await handler(req)
        except ClientDisconnected:
            return
        except DaariError as err:
            await self._error(req, err)
        except Exception:
            log.exception("unhandled error on %s %s", scope["method"], req.path)
            await self._error(req, DaariError("internal error in daari; see the server log"))

    async def _error(self, req: HttpRequest, err: DaariError, headers: dict[str, str] | None = None) -> None:
        status, body = req.wire.render_error(err)
        if status < 500:  # daari's own faults are logged with their traceback where they happen
            record_refusal(self.metrics, req.method, req.path, req.wire.name, err, status,
                           logged=req.decision_logged)
        await send_json(req.send, status, body, headers)

    async def _preflight(self, req: HttpRequest) -> None:
        """A browser asks before a JSON POST: only an allowed origin (and Host) gets the CORS answer."""
        guard.check_host(self.policy, req.headers)
        guard.check_origin(self.policy, req.headers)
        raw = [(k.encode("latin-1"), v.encode("latin-1"))
               for k, v in guard.preflight_headers(req.headers).items()]
        await req.send({"type": "http.response.start", "status": 204, "headers": raw})
        await req.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = header_map(scope)
        try:
            check_head(scope["headers"], self.limits)
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            guard.check_websocket(self.policy, headers, (query.get("token") or [None])[0])
            handler = self.routes.websocket.get(scope["path"].rstrip("/"))
            if handler is None:
                raise NotFound(f"no websocket route at {scope['path']}")
        except DaariError as err:
            await refuse_websocket(scope, receive, send, err)
            return
        await handler(scope, receive, send)


async def refuse_websocket(scope: Scope, receive: Receive, send: Send, err: DaariError) -> None:
    """Answer a refused handshake with an HTTP error body where the server allows it, else a bare close."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        status, body = OPENAI.render_error(err)
        payload = dumps(body)
        await send({"type": "websocket.http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "websocket.http.response.body", "body": payload, "more_body": False})
    else:
        await send({"type": "websocket.close", "code": 1008})


def _page_token(scope: Scope) -> str | None:
    """The token in the query of GET /ui (a browser opens the page by its URL); never for other routes."""
    if scope["method"] != "GET" or scope["path"].rstrip("/") != "/ui":
        return None
    tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return str(tokens[0]) if tokens else None


def _adding_headers(send: Send, extra: dict[str, str]) -> Send:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]

    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *raw]}
        await send(message)

    return wrapped
