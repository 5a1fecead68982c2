"""The collector's pauses are timed into `daari_gc_pause_seconds{generation}`, and a server runs with its young
threshold: both for as long as it serves."""

from __future__ import annotations

import gc
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from daari.metrics import Metrics
from daari.observe.gc_pauses import timed_collections
from tests.support import daari_server, make_config


def counts(metrics: Metrics) -> dict[str, float]:
    text = metrics.render().decode()
    return {s.labels["generation"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "daari_gc_pause_seconds_count"}


def test_each_collection_is_counted_under_its_generation_while_inside() -> None:
    metrics = Metrics()
    histogram = metrics.histogram("gc_pause_seconds", ("generation",))
    with timed_collections(histogram):
        assert counts(metrics) == {"0": 0, "1": 0, "2": 0}  # listed from the start
        gc.collect(2)
        gc.collect(0)
        during = counts(metrics)
    gc.collect(2)
    after = counts(metrics)
    # other collections may run meanwhile (allocations set them off), never fewer than those asked
    assert during["2"] >= 1 and during["0"] >= 1
    assert after == during  # gone from gc.callbacks once outside
    assert histogram.series(("2",))[-1] > 0  # the sum of the pauses, in seconds


async def test_a_server_shows_its_pauses_and_holds_its_thresholds_while_it_runs(tmp_path: Path) -> None:
    found = gc.get_threshold()
    config = make_config(tmp_path, server={"gc_young_threshold": 12_345, "gc_middle_threshold": 67})
    async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
        assert gc.get_threshold()[:2] == (12_345, 67)
        gc.collect()
        page = (await client.get("/metrics")).text
    assert gc.get_threshold() == found
    full = [s.value for family in text_string_to_metric_families(page) for s in family.samples
            if s.name == "daari_gc_pause_seconds_count" and s.labels == {"generation": "2"}]
    assert full and full[0] >= 1
