"""RedisActor: owns one Redis link (daari/cache/redis_link.py): its client's connections and the reconnect task.

Supervised like every actor and visible in /healthz. The stores (L0 and L1 in Redis) run commands on the link
directly, as request tasks peek L0's memory: coredis multiplexes concurrent commands on its connections, so a
mailbox round trip per command would only add latency. A Redis that is down does not make this actor fail: the
link says "down", requests bypass the cache, and the link reconnects with backoff.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from actors.runtime import Actor, Call, handles
from daari.cache.redis_link import RedisLink


@dataclass(frozen=True)
class LinkHealth(Call[dict[str, Any]]):
    """The link's state, as /healthz shows it."""


class RedisActor(Actor):
    name = "redis"

    def __init__(self, link: RedisLink) -> None:
        self.link = link

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.link.running():
            yield

    @handles(LinkHealth)
    async def health(self, request: LinkHealth) -> dict[str, Any]:
        return self.link.health()
