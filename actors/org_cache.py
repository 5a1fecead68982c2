"""OrgCacheActor: owns the org cache's tenant links (daari/org/client.py) and its background writer.

Supervised like every actor and visible in /healthz. Request tasks call the OrgCache directly, as they run commands
on the Redis stores: coredis multiplexes them, so a mailbox round trip would only add latency. The org cache not
answering does not make this actor fail: its lookups are misses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from actors.runtime import Actor
from daari.org.client import OrgCache


class OrgCacheActor(Actor):
    name = "org_cache"

    def __init__(self, org: OrgCache) -> None:
        self.org = org

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.org.running():
            yield
