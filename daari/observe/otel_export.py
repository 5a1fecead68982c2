"""The OTLP/HTTP trace exporter: decisions queued by a handler attached to the hub (a deque append, bounded),
posted as OTLP/JSON in batches by one task. Off by default; when off, nothing is attached and nothing runs."""

from __future__ import annotations

import logging
from collections import deque

import httpx
import trio

from daari.config import OtelConfig
from daari.metrics import Metrics
from daari.observe.otel import export_request
from daari.pipeline.decision import RoutingDecision

log = logging.getLogger("daari.otel")


class OtlpExporter:
    def __init__(self, config: OtelConfig, metrics: Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self.queue: deque[RoutingDecision] = deque()
        self._failing = False

    def add(self, decision: RoutingDecision) -> None:
        """The hub handler: never blocks; past `queue_size` a decision is dropped and counted."""
        if len(self.queue) >= self.config.queue_size:
            self.metrics.inc("otel_spans_dropped_total")
            return
        self.queue.append(decision)

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=self.config.timeout_s, headers=self.config.headers) as client:
            try:
                while True:
                    await trio.sleep(self.config.flush_interval_s)
                    await self.flush(client)
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(self.config.timeout_s):
                    await self.flush(client)  # what was answered before shutdown is exported

    async def flush(self, client: httpx.AsyncClient) -> None:
        while self.queue:
            batch = [self.queue.popleft() for _ in range(min(self.config.batch_size, len(self.queue)))]
            try:
                response = await client.post(self.config.endpoint, json=export_request(batch, self.config.service_name))
                response.raise_for_status()
            except httpx.HTTPError as exc:
                self.metrics.inc("otel_export_failures_total")
                if not self._failing:  # once per outage, not once per batch
                    log.warning("otel: export to %s failed: %s; traces are dropped until it answers",
                                self.config.endpoint, type(exc).__name__)
                self._failing = True
                return
            self.metrics.inc("otel_spans_exported_total", len(batch))
            self._failing = False
