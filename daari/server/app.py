"""The ASGI app: routes, protocol-shaped errors, and the per-request disconnect scope.

Every route answers in its protocol's own error shape (Anthropic for /v1/messages*, OpenAI elsewhere);
nothing escapes as a 500 with a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import trio

from actors.executor import ListModels, TierStatus
from daari.cache.key_memo import MemoKey, memo_key
from daari.cache.partition import cache_partition
from daari.config import redacted
from daari.cpu_budget import RequestWorkTicket
from daari.errors import DaariError, MethodNotAllowed, NotFound
from daari.jsonio import dumps
from daari.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from daari.metrics import Sample
from daari.observe.prompt_record import prompt_fields
from daari.pipeline.body_work import decode_json
from daari.pipeline.chat import ChatTurn, uses_l0
from daari.pipeline.controls import parse_controls
from daari.pipeline.hit_lane import RememberedHit, remembered_hit
from daari.pipeline.l1_tier import SemanticTier
from daari.pipeline.record import DecisionRecorder
from daari.pipeline.request_key import request_key, request_key_off_loop
from daari.pipeline.runtime import Runtime
from daari.pipeline.sink import Sink
from daari.protocol import anthropic_render, openai_render
from daari.protocol.wire import ANTHROPIC, OPENAI, RESPONSES, Wire
from daari.server import count_tokens, guard, observe_routes, responses_routes
from daari.server.asgi_io import (
    AsgiSink,
    ClientDisconnected,
    Receive,
    Scope,
    Send,
    answer_lifespan,
    header_map,
    read_body,
    send_json,
    watch_disconnect,
)
from daari.server.refusals import record_refusal
from daari.server.tail import tail

log = logging.getLogger("daari.server")

Handler = Callable[["Request"], Awaitable[None]]


class Request:
    __slots__ = ("rt", "scope", "receive", "send", "headers", "path", "wire", "decision_logged")

    def __init__(self, rt: Runtime, scope: Scope, receive: Receive, send: Send) -> None:
        self.rt = rt
        self.scope = scope
        self.receive = receive
        self.send = send
        self.headers = header_map(scope)
        self.path: str = scope["path"]
        self.wire: Wire = (ANTHROPIC if self.path.startswith("/v1/messages")
                           else RESPONSES if self.path.startswith(("/v1/responses", "/responses")) else OPENAI)
        self.decision_logged = False  # a chat request's routing decision already logged its refusal

    async def raw_body(self) -> bytes:
        return await read_body(self.receive, self.headers, self.rt.config.server.max_body_bytes)

    async def json_body(self) -> Any:
        return decode_json(await self.raw_body())

    async def error(self, err: DaariError, headers: dict[str, str] | None = None) -> None:
        status, body = self.wire.render_error(err)
        if status < 500:  # daari's own faults are logged with their traceback where they happen
            record_refusal(self.rt.metrics, self.scope["method"], self.path, self.wire.name, err, status,
                           logged=self.decision_logged)
        await send_json(self.send, status, body, headers)


async def chat(req: Request) -> None:
    await serve_chat(req, req.wire, AsgiSink(req.send))


async def serve_chat(req: Request, wire: Wire, out: Sink,
                     prepare: Callable[[Any], Awaitable[Any]] | None = None) -> None:
    """Parse the body (after `prepare`, which may rewrite it) and run the pipeline, recording the decision."""
    # Parsing and hashing are request work: an embedded generation pauses between tokens until the key is known.
    with RequestWorkTicket() as parsing:
        await _serve_chat(req, wire, out, prepare, parsing)


async def _serve_chat(req: Request, wire: Wire, out: Sink, prepare: Callable[[Any], Awaitable[Any]] | None,
                      parsing: RequestWorkTicket) -> None:
    rt = req.rt
    recorder = DecisionRecorder(rt.decisions, wire.name, req.headers,
                                lambda request: prompt_fields(rt.config.log.prompts, rt.log_secret, request))
    found_by: MemoKey | None = None  # the body's memo key, when the bytes as received are the request
    hit: RememberedHit | None = None
    try:
        raw = await req.raw_body()
        parsing.start()  # reading the body waited on the client; from here it is CPU
        work = rt.body_work
        heavy = work.heavy(len(raw))  # a large body is decoded, validated and hashed off the event loop
        controls = parse_controls(req.headers)
        partition = cache_partition(rt.partition_secret, req.headers)
        query_string = req.scope.get("query_string", b"").decode("latin-1")
        if prepare is None and not heavy and uses_l0(rt, controls):
            found_by = memo_key(raw, wire.name, controls.tier_override, partition)
            hit = remembered_hit(rt, wire, found_by, req.headers, query_string)
        if hit is not None:
            request = hit.request
        else:
            body = await work.run(decode_json, raw) if heavy else decode_json(raw)
            if prepare is not None:
                body = await prepare(body)
            request = await work.run(wire.parse, body, req.headers) if heavy else wire.parse(body, req.headers)
            request.query_string = query_string
    except DaariError as err:
        recorder.refused(err, wire.render_error(err)[0])
        req.decision_logged = True  # the decision's log line is this refusal's
        raise
    except ClientDisconnected:
        recorder.abandoned()
        raise
    sink = recorder.parsed(request, out)
    turn = ChatTurn(rt, request, controls, wire, sink, req.headers, partition)
    if hit is not None:
        turn.key = hit.key
    elif turn.cache_on:
        turn.key = (await request_key_off_loop(rt, turn, raw if prepare is None else None) if heavy
                    else request_key(rt, turn, found_by))
    parsing.done()
    try:
        if hit is not None:
            await turn.serve_entry(hit.entry)
            return
        entry = rt.l0_memory.peek(turn.key) if found_by is not None else None
        if found_by is not None and entry is not None:
            rt.hit_requests.put(found_by, request, len(raw))  # the next copy of these bytes takes the hit lane
            await turn.serve_entry(entry)
            return
        if await turn.serve_from_cache():
            return  # an L0 hit waits on nothing external: no disconnect watcher needed
        # From here a client that leaves cancels everything the request started (upstream calls included).
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_disconnect, req.receive, nursery.cancel_scope)
            await turn.run()
            nursery.cancel_scope.cancel()
    finally:
        recorder.finished(turn.meta)


async def root(req: Request) -> None:
    """`HEAD /` is Claude Code's connectivity probe; `GET /` says what is listening."""
    await send_json(req.send, 200, {"service": "daari", "status": "ok"})


def _anthropic_client(req: Request) -> bool:
    return "anthropic-version" in req.headers or "x-api-key" in req.headers


async def model(req: Request) -> None:
    """GET /v1/models/{id}: daari passes any model name through, so every id is served."""
    model_id = req.path.removeprefix("/v1/models/").removeprefix("/models/")
    if _anthropic_client(req):
        await send_json(req.send, 200, anthropic_render.render_models([model_id])["data"][0])
    else:
        await send_json(req.send, 200, openai_render.render_models([model_id], int(req.rt.started_at))["data"][0])


async def models(req: Request) -> None:
    names = await req.rt.executor.call(ListModels())
    ids = ["daari", *[m for m in names if m != "daari"]]
    if _anthropic_client(req):
        await send_json(req.send, 200, anthropic_render.render_models(ids))
    else:
        await send_json(req.send, 200, openai_render.render_models(ids, int(req.rt.started_at)))


async def healthz(req: Request) -> None:
    health = req.rt.health
    tiers = await _tier_status(req)
    actors = {name: {"state": s.state, "restarts": s.restarts, "last_error": s.last_error}
              for name, s in health.actors.items()}
    models_loaded = all(t.get("loaded", True) for t in tiers.values())
    body = {"status": "ok" if health.healthy else "unhealthy", "actors": actors, "tiers": tiers,
            "models_loaded": models_loaded}
    l1 = req.rt.shortcuts.get("L1")
    if isinstance(l1, SemanticTier):
        body["l1"] = l1.health()  # L1 loading or unavailable does not make daari unhealthy: it is skipped
    await send_json(req.send, 200 if health.healthy else 503, body)


async def _tier_status(req: Request) -> dict[str, Any]:
    """Per-tier state from the ExecutorActor; empty when that actor is down (health says so already)."""
    try:
        return await req.rt.executor.call_or_shed(TierStatus())
    except DaariError:
        return {}


async def config(req: Request) -> None:
    await send_json(req.send, 200, redacted(req.rt.config))


async def metrics(req: Request) -> None:
    samples: list[Sample] = []
    for name, status in req.rt.health.actors.items():
        samples.append(Sample("actor_restarts_total", status.restarts, {"actor": name}, counter=True))
        samples.append(Sample("actor_up", 1.0 if status.state == "running" else 0.0, {"actor": name}))
    for tier, state in (await _tier_status(req)).items():
        breaker = state.get("breaker")
        if breaker:
            samples.append(Sample("breaker_open", 1.0 if breaker["state"] == "open" else 0.0, {"tier": tier}))
            samples.append(Sample("breaker_half_open", 1.0 if breaker["state"] == "half_open" else 0.0,
                                  {"tier": tier}))
            samples.append(Sample("breaker_consecutive_failures", breaker["consecutive_failures"], {"tier": tier}))
    samples.append(Sample("tail_subscribers", req.rt.tail_subscribers))
    body = req.rt.metrics.render(samples)
    await req.send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", METRICS_CONTENT_TYPE.encode())]})
    await req.send({"type": "http.response.body", "body": body, "more_body": False})


ROUTES: dict[str, dict[str, Handler]] = {
    "/": {"GET": root, "HEAD": root},
    "/v1/chat/completions": {"POST": chat},
    "/chat/completions": {"POST": chat},
    "/v1/messages": {"POST": chat},
    "/v1/messages/count_tokens": {"POST": count_tokens.count_tokens},
    "/v1/responses": {"POST": responses_routes.create},
    "/responses": {"POST": responses_routes.create},
    "/v1/models": {"GET": models},
    "/models": {"GET": models},
    "/healthz": {"GET": healthz},
    "/v1/daari/config": {"GET": config},
    "/metrics": {"GET": metrics},
    "/ui": {"GET": observe_routes.ui},
    "/v1/daari/report": {"GET": observe_routes.report},
}

CHAT_HANDLERS = (chat, responses_routes.create)  # the routes whose every request ends in a RoutingDecision

# Websocket routes (the live tail will be /v1/daari/tail): each runs only after `guard.check_websocket`.
WebsocketHandler = Callable[[Runtime, Scope, Receive, Send], Awaitable[None]]
WEBSOCKET_ROUTES: dict[str, WebsocketHandler] = {"/v1/daari/tail": tail}


class DaariApp:
    def __init__(self, rt: Runtime, policy: guard.GuardPolicy | None = None) -> None:
        self.rt = rt
        self.policy = policy or guard.GuardPolicy.from_config(rt.config.server)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        req = Request(self.rt, scope, receive, send)
        cors = guard.cors_headers(self.policy, req.headers)
        if cors:
            req.send = _adding_headers(send, cors)
        try:
            if guard.is_preflight(scope["method"], req.headers):
                await self._preflight(req)
                return
            path = req.path.rstrip("/") or "/"
            try:
                guard.check_http(self.policy, scope["method"], req.headers, _page_token(scope))
            except DaariError as err:
                if ROUTES.get(path, {}).get(scope["method"]) in CHAT_HANDLERS:  # a refused chat request is a decision
                    DecisionRecorder(self.rt.decisions, req.wire.name, req.headers).refused(
                        err, req.wire.render_error(err)[0])
                    req.decision_logged = True
                raise
            req.headers = guard.without_token(self.policy, req.headers)
            methods = ROUTES.get(path)
            if methods is None and path.startswith(("/v1/models/", "/models/")):
                methods = {"GET": model}
            if methods is None and path.startswith(("/v1/responses/", "/responses/")):
                methods = {"GET": responses_routes.get, "DELETE": responses_routes.delete}
            if methods is None:
                raise NotFound(f"no route for {scope['method']} {req.path}")
            handler = methods.get(scope["method"])
            if handler is None:
                await req.error(MethodNotAllowed(f"{scope['method']} is not allowed on {req.path}; "
                                                 f"use {', '.join(methods)}"), {"allow": ", ".join(methods)})
                return
            await handler(req)
        except ClientDisconnected:
            return
        except DaariError as err:
            await req.error(err)
        except Exception:
            log.exception("unhandled error on %s %s", scope["method"], req.path)
            await req.error(DaariError("internal error in daari; see the server log"))

    async def _preflight(self, req: Request) -> None:
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
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            guard.check_websocket(self.policy, headers, (query.get("token") or [None])[0])
            handler = WEBSOCKET_ROUTES.get(scope["path"].rstrip("/"))
            if handler is None:
                raise NotFound(f"no websocket route at {scope['path']}")
        except DaariError as err:
            await refuse_websocket(scope, receive, send, err)
            return
        await handler(self.rt, scope, receive, send)


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
