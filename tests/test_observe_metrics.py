"""The watcher metrics move with the requests made: by client, cache lookups, escalation paths, cost, tails."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families
from trio_websocket import open_websocket_url

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def test_metrics_follow_requests_and_tails(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1"),
                                              "L6": upstream_tier("openai", upstream + "/v1")},
                             frontier={"enabled": True},
                             pricing={"tiers": {"L6": {"input_per_mtok": 1_000_000, "output_per_mtok": 0}}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            before = samples((await client.get("/metrics")).text)
            for model in ("good", "good", "refuse"):  # a miss, its L0 hit, and an answer that escalates L3 -> L6
                await client.post("/v1/chat/completions", headers={"user-agent": "aider/0.86 openai/python"},
                                  json={"model": model, "messages": [{"role": "user", "content": "explain git"}]})
            async with open_websocket_url(server.url.replace("http", "ws") + "/v1/daari/tail"):
                with trio.fail_after(10):
                    while server.parts.tail.open < 1:
                        await trio.sleep(0.01)
                with trio.fail_after(10):
                    while True:  # the metrics subscriber runs beside the requests: wait until it caught up
                        during = samples((await client.get("/metrics")).text)
                        if during.get(("daari_cache_lookups_total", (("level", "L0"), ("result", "miss")))) == 2:
                            break
                        await trio.sleep(0.02)
    assert ("daari_requests_by_client_total", (("client", "aider"), ("protocol", "openai"), ("tier", "L3"))) \
        not in before
    assert during[("daari_requests_by_client_total",
                   (("client", "aider"), ("protocol", "openai"), ("tier", "L3")))] == 1
    assert during[("daari_requests_by_client_total",
                   (("client", "aider"), ("protocol", "openai"), ("tier", "L0")))] == 1
    assert during[("daari_cache_lookups_total", (("level", "L0"), ("result", "hit")))] == 1
    assert during[("daari_escalations_by_path_total", (("path", "L3>L6"),))] == 1
    assert during[("daari_tail_subscribers", ())] == 1 and during[("daari_tail_connections_total", ())] == 1
    # the loop's tasks: the live tail's connection holds some while it is open
    assert during[("daari_event_loop_tasks", ())] > before[("daari_event_loop_tasks", ())] > 1
    # Priced at $1 per prompt token at L6: everything answered locally saved its prompt tokens' worth.
    assert during[("daari_cost_usd_total", (("tier", "L6"),))] > 0
    assert during[("daari_cost_saved_usd_total", ())] > 0
