"""daari's metrics through prometheus-client: counters and latency histograms, exposed at GET /metrics.

Callers name a metric and its labels (`metrics.inc("requests_total", tier="L3")`); each name is declared
on first use with the label names it came with, in one registry per server. State that is read at scrape
time (actor and breaker states) is passed to `render` as `Sample`s.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "daari_"
CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
# Seconds: a cache hit takes well under 10 ms, a local model seconds, a frontier answer up to minutes.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

HELP = {
    "requests_total": "Chat requests answered, by the tier that answered and the cache result.",
    "errors_total": "Chat requests that ended in an error, by error code.",
    "refused_total": "Requests refused before routing (bad body, unknown route, guard...), by code and status.",
    "escalations_total": "Answers below their tier's confidence threshold that escalated to the next tier.",
    "tier_failures_total": "Tier attempts that failed, by tier and error code.",
    "cache_false_hits_avoided_total": "L1 candidates the verifier rejected: near-misses that were never served.",
    "cache_l1_rejections_total": "L1 candidates the verifier rejected, by the rule that rejected them.",
    "cache_bypassed_total": "Requests routed without the cache because it failed, by operation (read, write).",
    "cache_write_failures_total": "Answers whose L0 disk write failed (disk full, read-only, locked).",
    "cache_write_queue_full_total": "Answers not cached because too many writes were pending.",
    "requests_by_client_total": "Chat requests answered, by tier, client protocol and client family.",
    "cache_lookups_total": "Cache lookups by level (L0, L1) and result (hit, miss).",
    "escalations_by_path_total": "Answers that escalated, by the path taken (e.g. L3>L4>L6).",
    "cost_usd_total": "Estimated cost of the answers (pricing:), by the tier that answered.",
    "cost_saved_usd_total": "Estimated cost saved against sending every answered request to L6.",
    "decision_log_rows_dropped_total": "Decisions not written to the decision log (it fell behind or failed).",
    "tail_connections_total": "Live-tail websocket connections accepted.",
    "tail_subscribers": "Live-tail websocket clients connected now.",
    "decision_subscribers_dropped_total": "Decision hub subscribers dropped for falling behind.",
    "request_duration_seconds": "Time to answer a chat request (until its last byte), by answering tier.",
    "first_byte_seconds": "Time until a chat response started (a stream's first event), by answering tier.",
    "actor_restarts_total": "Restarts of each actor since daari started.",
    "actor_up": "1 while the actor runs, else 0.",
    "breaker_open": "1 while the tier's circuit breaker is open.",
    "breaker_half_open": "1 while the tier's circuit breaker lets a trial request through.",
    "breaker_consecutive_failures": "Consecutive failures the tier's circuit breaker has counted.",
}

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series only add noise to a local proxy's page


@dataclass(frozen=True)
class Sample:
    """One scrape-time value: a gauge, or a counter kept elsewhere (`counter=True`)."""

    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)
    counter: bool = False


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._counters: dict[str, tuple[Counter, tuple[str, ...]]] = {}
        self._histograms: dict[str, tuple[Histogram, tuple[str, ...]]] = {}
        # The labelled child of each (name, labels) seen: prometheus-client's labels() costs a few us, and
        # every request counts several metrics (the L0 hit path included).
        self._children: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        key = (name, tuple(labels.items()))
        child = self._children.get(key)
        if child is None:
            counter, names = self._counters.get(name) or self._declare_counter(name, labels)
            _check_labels(name, names, labels)
            child = self._children[key] = counter.labels(**labels) if names else counter
        child.inc(amount)

    def observe(self, name: str, value: float, **labels: str) -> None:
        """A latency (seconds) into histogram `name`."""
        key = ("histogram:" + name, tuple(labels.items()))
        child = self._children.get(key)
        if child is None:
            histogram, names = self._histograms.get(name) or self._declare_histogram(name, labels)
            _check_labels(name, names, labels)
            child = self._children[key] = histogram.labels(**labels) if names else histogram
        child.observe(value)

    def value(self, name: str, **labels: str) -> float:
        """The current value of a counter (0 when never counted): for tests and benchmarks."""
        full = PREFIX + (name if name.endswith("_total") else f"{name}_total")
        return self.registry.get_sample_value(full, labels) or 0.0

    def render(self, samples: Iterable[Sample] = ()) -> bytes:
        """Prometheus text exposition: everything counted, plus the scrape-time `samples`."""
        text = prometheus_client.generate_latest(self.registry)
        extra = list(samples)
        if extra:
            scrape = CollectorRegistry(auto_describe=False)
            scrape.register(_SampleCollector(extra))
            text += prometheus_client.generate_latest(scrape)
        return text

    def _declare_counter(self, name: str, labels: dict[str, str]) -> tuple[Counter, tuple[str, ...]]:
        names = tuple(sorted(labels))
        counter = Counter(PREFIX + name, _help(name), names, registry=self.registry)
        self._counters[name] = (counter, names)
        return counter, names

    def _declare_histogram(self, name: str, labels: dict[str, str]) -> tuple[Histogram, tuple[str, ...]]:
        names = tuple(sorted(labels))
        histogram = Histogram(PREFIX + name, _help(name), names, registry=self.registry, buckets=LATENCY_BUCKETS)
        self._histograms[name] = (histogram, names)
        return histogram, names


def _help(name: str) -> str:
    return HELP.get(name, f"daari {name.replace('_', ' ')}")


def _check_labels(name: str, declared: tuple[str, ...], labels: dict[str, str]) -> None:
    if tuple(sorted(labels)) != declared:
        raise ValueError(f"metric {name} has labels {list(declared)}, got {sorted(labels)}")


class _SampleCollector(Collector):
    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for sample in self.samples:
            names = sorted(sample.labels)
            family = families.get(sample.name)
            if family is None:
                kind = CounterMetricFamily if sample.counter else GaugeMetricFamily
                family = kind(PREFIX + sample.name, _help(sample.name), labels=names)
                families[sample.name] = family
            family.add_metric([sample.labels[n] for n in names], sample.value)  # type: ignore[attr-defined]
        yield from families.values()
