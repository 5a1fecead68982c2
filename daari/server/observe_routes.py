"""GET /ui (the live page) and GET /v1/daari/report (the report's figures as JSON) for people watching daari."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

import trio

from daari.budget.caps import periods
from daari.budget.report import read_spend, spend_summary
from daari.errors import InvalidRequest
from daari.metrics import Metrics
from daari.observe.decision_log import decisions_path, read_rows
from daari.observe.report import parse_since, summarize
from daari.server.asgi_io import send_json, send_text
from daari.server.http_request import HttpRequest

_READERS = trio.CapacityLimiter(2)


def ui_page() -> str:
    return resources.files("daari.server").joinpath("static/ui.html").read_text(encoding="utf-8")


TrustFigures = Callable[[float], Awaitable[dict[str, Any]]]


class ObserveRoutes:
    def __init__(self, data_dir: str, metrics: Metrics, trust: TrustFigures | None = None) -> None:
        self.decisions = decisions_path(data_dir)
        self.data_dir = data_dir
        self.metrics = metrics
        self.trust = trust  # the shadow outcomes' figures (server/shadow_wiring.py)

    async def ui(self, req: HttpRequest) -> None:
        await send_text(req.send, 200, ui_page(), "text/html; charset=utf-8")

    async def report(self, req: HttpRequest) -> None:
        query = parse_qs(req.query_string)
        since = (query.get("since") or ["24h"])[0]
        try:
            window = parse_since(since)
        except ValueError as exc:
            raise InvalidRequest(str(exc), param="since") from None
        rows = await trio.to_thread.run_sync(read_rows, self.decisions, time.time() - window, limiter=_READERS)
        body = summarize(rows, false_hits_avoided=int(self.metrics.value("cache_false_hits_avoided_total")))
        spend = await trio.to_thread.run_sync(read_spend, self.data_dir, periods(time.time() - window)["day"],
                                              limiter=_READERS)
        body["spend"] = spend_summary(spend)
        if self.trust is not None:
            body.update(await self.trust(time.time() - window))
        body["since"] = since
        await send_json(req.send, 200, body)
