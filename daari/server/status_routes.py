"""What daari says about itself: `GET /` (and Claude Code's `HEAD /` probe), the model lists, `/healthz`,
`/v1/daari/config` and `/metrics`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from actors.executor import ListModels, TierStatus
from actors.runtime import Address, Health
from daari.config import Config, redacted
from daari.errors import DaariError
from daari.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from daari.metrics import Metrics, Sample
from daari.observe.loop_tasks import loop_task_count
from daari.protocol import anthropic_render, openai_render
from daari.server.asgi_io import send_json
from daari.server.http_request import HttpRequest


def _anthropic_client(req: HttpRequest) -> bool:
    return "anthropic-version" in req.headers or "x-api-key" in req.headers


class StatusRoutes:
    def __init__(self, config: Config, health: Health, executor: Address, metrics: Metrics, started_at: float,
                 l1_health: Callable[[], dict[str, Any]] | None, tail_connections: Callable[[], int],
                 model_ids: Callable[[], list[str]] | None = None,
                 components: Mapping[str, Callable[[], dict[str, Any]]] | None = None,
                 gauges: Callable[[], list[Sample]] | None = None) -> None:
        self.config = config
        self.health = health
        self.executor = executor
        self.metrics = metrics
        self.started_at = started_at
        self.l1_health = l1_health  # None without L1
        self.tail_connections = tail_connections
        self.model_ids = model_ids  # names from the config (routing.models, tiers' models), no I/O
        # Parts that degrade without making daari unhealthy (Redis down: the cache is bypassed), by /healthz key.
        self.components = dict(components or {})
        self.gauges = gauges  # their scrape-time values for /metrics (redis_up)

    async def root(self, req: HttpRequest) -> None:
        """`HEAD /` is Claude Code's connectivity probe; `GET /` says what is listening."""
        await send_json(req.send, 200, {"service": "daari", "status": "ok"})

    async def model(self, req: HttpRequest) -> None:
        """GET /v1/models/{id}: daari passes any model name through, so every id is served."""
        model_id = req.path.removeprefix("/v1/models/").removeprefix("/models/")
        if _anthropic_client(req):
            await send_json(req.send, 200, anthropic_render.render_models([model_id])["data"][0])
        else:
            await send_json(req.send, 200, openai_render.render_models([model_id], int(self.started_at))["data"][0])

    async def models(self, req: HttpRequest) -> None:
        listed: list[str] = await self.executor.call(ListModels())
        names = set(listed)
        names.update(self.model_ids() if self.model_ids is not None else ())
        ids = ["daari", *sorted(names - {"daari"})]
        if _anthropic_client(req):
            await send_json(req.send, 200, anthropic_render.render_models(ids))
        else:
            await send_json(req.send, 200, openai_render.render_models(ids, int(self.started_at)))

    async def healthz(self, req: HttpRequest) -> None:
        health = self.health
        tiers = await self._tier_status()
        actors = {name: {"state": s.state, "restarts": s.restarts, "last_error": s.last_error, "depth": s.depth,
                         "capacity": s.capacity}
                  for name, s in health.actors.items()}
        models_loaded = all(t.get("loaded", True) for t in tiers.values())
        body = {"status": "ok" if health.healthy else "unhealthy", "actors": actors, "tiers": tiers,
                "models_loaded": models_loaded}
        if self.l1_health is not None:
            body["l1"] = self.l1_health()  # L1 loading or unavailable does not make daari unhealthy: it is skipped
        for name, component in self.components.items():
            body[name] = component()
        await send_json(req.send, 200 if health.healthy else 503, body)

    async def _tier_status(self) -> dict[str, Any]:
        """Per-tier state from the ExecutorActor; empty when that actor is down (health says so already)."""
        try:
            return await self.executor.call_or_shed(TierStatus())
        except DaariError:
            return {}

    async def show_config(self, req: HttpRequest) -> None:
        await send_json(req.send, 200, redacted(self.config))

    async def metrics_page(self, req: HttpRequest) -> None:
        samples: list[Sample] = []
        for name, status in self.health.actors.items():
            samples.append(Sample("actor_restarts_total", status.restarts, {"actor": name}, counter=True))
            samples.append(Sample("actor_up", 1.0 if status.state == "running" else 0.0, {"actor": name}))
            samples.append(Sample("actor_mailbox_depth", status.depth, {"actor": name}))
            samples.append(Sample("actor_mailbox_capacity", status.capacity, {"actor": name}))
        for tier, state in (await self._tier_status()).items():
            breaker = state.get("breaker")
            if breaker:
                samples.append(Sample("breaker_open", 1.0 if breaker["state"] == "open" else 0.0, {"tier": tier}))
                samples.append(Sample("breaker_half_open", 1.0 if breaker["state"] == "half_open" else 0.0,
                                      {"tier": tier}))
                samples.append(Sample("breaker_consecutive_failures", breaker["consecutive_failures"],
                                      {"tier": tier}))
        samples.append(Sample("tail_subscribers", self.tail_connections()))
        samples.append(Sample("event_loop_tasks", loop_task_count()))
        if self.gauges is not None:
            samples.extend(self.gauges())
        body = self.metrics.render(samples)
        await req.send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", METRICS_CONTENT_TYPE.encode())]})
        await req.send({"type": "http.response.body", "body": body, "more_body": False})
