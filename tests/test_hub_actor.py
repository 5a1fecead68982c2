"""The decision hub on the actor runtime: supervised, visible in /healthz, closed with the runtime."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from actors.faults import FAULTS
from actors.hub import Hub, HubActor, HubStats
from actors.runtime import ActorSpec, Health, start_actors
from tests.support import daari_server, make_config


async def test_the_hub_actor_reports_its_figures_and_its_row_closes_the_hub_when_the_runtime_stops() -> None:
    hub: Hub[str] = Hub()
    async with trio.open_nursery() as nursery:
        addresses = await start_actors(nursery, [ActorSpec("hub", lambda: HubActor(hub), on_down=hub.close)],
                                       Health(), FAULTS)
        subscription = hub.subscribe("tail", buffer=1)
        hub.publish("a")
        hub.publish("b")  # the tail's buffer of one is full: dropped
        figures = await addresses["hub"].call(HubStats())
        assert figures.published == 2 and figures.dropped == {"tail": 1} and figures.subscribers == []
        live = hub.subscribe("live")
        nursery.cancel_scope.cancel()
    assert [item async for item in live] == []  # the hub closed with the runtime: its subscription ended
    assert subscription.lagged


async def test_healthz_shows_the_hub_and_the_decision_log_as_actors(tmp_path: Path) -> None:
    async with daari_server(make_config(tmp_path)) as server, httpx.AsyncClient(base_url=server.url) as client:
        with trio.fail_after(30):
            while server.parts.health.status("decision_log").state != "running":
                await trio.sleep(0.01)
        health = (await client.get("/healthz")).json()
    assert health["actors"]["hub"]["state"] == "running"
    assert health["actors"]["decision_log"]["state"] == "running"
