"""GET /v1/daari/tail: the live tail, one JSON message per routing decision, filtered by the query string.

Each connection is its own bounded hub subscription: a client that falls behind is closed with code 4008
(it never slows routing); shutdown closes every tail at once with 1001, so tails never hold up the grace
period. The guard (Host, Origin, token) ran before this handler.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from actors.hub import Hub, Subscription
from daari.config import TailConfig
from daari.errors import UpgradeRequired
from daari.metrics import Metrics
from daari.observe.tail_filter import FilterError, parse_filter
from daari.pipeline.decision import RoutingDecision
from daari.server.asgi_io import Receive, Scope, Send
from daari.server.http_request import HttpRequest

log = logging.getLogger("daari.tail")

CLOSE_GOING_AWAY = 1001  # daari is shutting down
CLOSE_BAD_FILTER = 4400
CLOSE_LAGGED = 4008


class TailRoute:
    def __init__(self, decisions: Hub[RoutingDecision], config: TailConfig, stopping: trio.Event,
                 metrics: Metrics) -> None:
        self.decisions = decisions
        self.config = config
        self.stopping = stopping  # set when daari starts shutting down: tails close at once with 1001
        self.metrics = metrics
        self.open = 0  # live-tail websockets now, for /metrics

    async def over_http(self, req: HttpRequest) -> None:
        """A plain GET (no websocket upgrade): say how to open the tail instead of a 404."""
        raise UpgradeRequired("GET /v1/daari/tail is a websocket: open it with an Upgrade: websocket handshake "
                              "(`daari tail`, or the page at /ui)")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        try:
            wanted = parse_filter(scope.get("query_string", b"").decode("latin-1"))
        except FilterError as exc:
            await send({"type": "websocket.close", "code": CLOSE_BAD_FILTER, "reason": str(exc)[:120]})
            return
        config = self.config
        self.metrics.inc("tail_connections_total")
        code: int | None = None  # stays None when the client left first: nothing to close
        reason = ""
        with self.decisions.subscribe("tail", buffer=config.buffer, accept=wanted.matches) as subscription:
            self.open += 1
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_until_client_closes, receive, nursery.cancel_scope)
                    nursery.start_soon(_until_shutdown, self.stopping, subscription)
                    code, reason = await _forward(subscription, send, config.send_timeout_s)
                    nursery.cancel_scope.cancel()
            finally:
                self.open -= 1
        if code is not None:
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                await _close(send, code, reason)


async def _forward(subscription: Subscription[RoutingDecision], send: Send,
                   send_timeout_s: float) -> tuple[int | None, str]:
    """Send decisions until the subscription ends; the close code and reason to end the connection with."""
    async for decision in subscription:
        if subscription.lagged:
            break  # what is still queued is stale for a live view: tell the client now
        with trio.move_on_after(send_timeout_s) as timer:
            await send({"type": "websocket.send", "text": decision.json_text})
        if timer.cancelled_caught:
            return None, "stalled"  # a client that does not read: drop the connection, no close handshake
    if subscription.lagged:
        return CLOSE_LAGGED, "fell behind: too many decisions queued; reconnect to follow again"
    return CLOSE_GOING_AWAY, "daari is shutting down"


async def _until_client_closes(receive: Receive, scope: trio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            scope.cancel()
            return


async def _until_shutdown(stopping: trio.Event, subscription: Subscription[Any]) -> None:
    await stopping.wait()
    subscription.close()  # the forwarder stops at once and closes the connection with 1001


async def _close(send: Send, code: int, reason: str) -> None:
    try:
        await send({"type": "websocket.close", "code": code, "reason": reason})
    except Exception:  # the connection is already gone: nothing to tell
        log.debug("tail close after the connection ended", exc_info=True)
