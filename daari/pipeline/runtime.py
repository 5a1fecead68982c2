"""What a request task needs from the running server: config, actor addresses, health and metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import trio

from actors.hub import Hub
from actors.runtime import Address, Health
from daari.cache.hit_requests import HitRequests
from daari.cache.key_memo import L0KeyMemo
from daari.cache.l0_memory import L0Memory
from daari.config import Config
from daari.metrics import Metrics
from daari.pipeline.body_work import BodyWork
from daari.pipeline.decision import RoutingDecision
from daari.pipeline.shortcuts import ShortcutTier
from daari.responses.store import ResponseArchive


@dataclass
class Runtime:
    config: Config
    cache: Address
    executor: Address
    health: Health
    metrics: Metrics = field(default_factory=Metrics)
    # Per tier: whether its executor can produce tool calls (known at start, from the executor classes).
    tools_capable: dict[str, bool] = field(default_factory=dict)
    executor_kinds: dict[str, str] = field(default_factory=dict)
    # L0's in-memory front: request tasks peek it; the CacheActor is its only writer.
    l0_memory: L0Memory = field(default_factory=lambda: L0Memory(64 * 1024 * 1024))
    started_at: float = field(default_factory=time.time)
    # Shortcut tiers by name ("CCS", "L1", "L2", "Lt"), registered at start; see pipeline/shortcuts.py.
    shortcuts: dict[str, ShortcutTier] = field(default_factory=dict)
    # One RoutingDecision per request is published here (pipeline/record.py); subscribers: log line,
    # metrics (pipeline/decision_subscribers.py), decision log, live tail, shadow sampler.
    decisions: Hub[RoutingDecision] = field(default_factory=lambda: Hub(default_buffer=256))
    # L0 keys by the exact request bytes (cache/key_memo.py): a body sent again is not canonicalized again.
    key_memo: L0KeyMemo = field(default_factory=L0KeyMemo)
    # The parsed requests of L0 hits by the same bytes (cache/hit_requests.py): a repeat is not parsed again.
    hit_requests: HitRequests = field(default_factory=HitRequests)
    # Decoding, validating and hashing large request bodies on worker threads (server.thread_parse_bytes).
    body_work: BodyWork = field(default_factory=lambda: BodyWork(256 * 1024))
    # The HMAC key of the cache partitions when a tier forwards client keys; None: one shared partition.
    partition_secret: bytes | None = None
    # The key of the decision log's prompt hashes (log.prompts: hash), from the data dir.
    log_secret: bytes | None = None
    # Set when daari starts shutting down: live tails close at once instead of holding the grace period.
    stopping: trio.Event = field(default_factory=trio.Event)
    tail_subscribers: int = 0  # open live-tail websockets, for /metrics

    def __post_init__(self) -> None:
        if self.decisions.on_drop is None:
            metrics = self.metrics
            self.decisions.on_drop = lambda name: metrics.inc("decision_subscribers_dropped_total",
                                                              subscriber=name)
    # Stored Responses API responses (previous_response_id, GET /v1/responses/{id}); set by the server.
    responses: ResponseArchive | None = None
