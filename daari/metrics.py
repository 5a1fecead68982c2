"""daari's metrics: counters and latency histograms kept as plain numbers, exposed at GET /metrics through
prometheus-client (a custom collector builds the families at scrape time).

Callers name a metric and its labels (`metrics.inc("requests_total", tier="L3")`); every name is declared once,
with its label names, in COUNTERS or HISTOGRAMS below, and is on the page from startup (counting into an
undeclared name raises). Per-request callers hold the family instead (`metrics.counter(name,
label_names).inc(values)`). State that is read at scrape time (actor and breaker states) is passed to `render`
as `Sample`s.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

PREFIX = "daari_"
CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
# Seconds: a cache hit takes well under 10 ms, a local model seconds, a frontier answer up to minutes.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

@dataclass(frozen=True)
class Declared:
    """A counter or histogram daari exports: its label names (sorted), its help text, and the series known
    from the start (label values), present at 0 before the first event (Prometheus practice: `rate()` and
    alerts need the series to exist). A counter without labels always has its one series from the start."""

    labels: tuple[str, ...]
    help: str
    start: tuple[tuple[str, ...], ...] = ()


_LOOKUPS = (("L0", "hit"), ("L0", "miss"), ("L1", "hit"), ("L1", "miss"))
# Every counter daari counts into, declared once: counting into an undeclared name is an error.
COUNTERS: dict[str, Declared] = {
    "requests_total": Declared(("cache", "tier"), "Chat requests answered, by the tier that answered and the cache "
                               "result."),
    "errors_total": Declared(("code",), "Chat requests that ended in an error, by error code (a client that left "
                             "is not one)."),
    "abandoned_total": Declared(("tier",), "Chat requests whose client left before the answer was finished "
                                "(status 499), by tier."),
    "refused_total": Declared(("code", "status"), "Requests refused before routing (bad body, unknown route, "
                              "guard...), by code and status."),
    "escalations_total": Declared(("tier",), "Answers below their tier's confidence threshold that escalated to "
                                  "the next tier."),
    "tier_failures_total": Declared(("code", "tier"), "Tier attempts that failed, by tier and error code."),
    "cache_false_hits_avoided_total": Declared((), "L1 candidates the verifier rejected: near-misses that were "
                                               "never served."),
    "cache_l1_rejections_total": Declared(("rule",), "L1 candidates the verifier rejected, by the rule that "
                                          "rejected them."),
    "cache_l1_embed_memo_hits_total": Declared((), "L1 probes that reused a recent embedding of the same text (no "
                                               "model run)."),
    "cache_l1_misses_without_model_total": Declared((), "L1 misses found without running the embedding model: no "
                                                    "stored entry shares the request's lookup context."),
    "cache_bypassed_total": Declared(("op",), "Requests routed without the cache because it failed, by operation "
                                     "(read, write).", (("read",), ("write",))),
    "cache_write_failures_total": Declared((), "Answers whose L0 disk write failed (disk full, read-only, "
                                           "locked)."),
    "cache_write_queue_full_total": Declared((), "Answers not cached because too many writes were pending."),
    "requests_by_client_total": Declared(("client", "protocol", "tier"), "Chat requests answered, by tier, client "
                                         "protocol and client family."),
    "cache_lookups_total": Declared(("level", "result"), "Cache lookups by level (L0, L1) and result (hit, miss).",
                                    _LOOKUPS),
    "escalations_by_path_total": Declared(("path",), "Answers that escalated, by the path taken (e.g. L3>L4>L6)."),
    "cost_usd_total": Declared(("tier",), "Estimated cost of the answers (pricing:), by the tier that answered."),
    "cost_saved_usd_total": Declared((), "Estimated cost saved against sending every answered request to L6."),
    "decision_log_rows_dropped_total": Declared((), "Decisions not written to the decision log (it fell behind or "
                                                "failed)."),
    "tail_connections_total": Declared((), "Live-tail websocket connections accepted."),
    "decision_subscribers_dropped_total": Declared(("subscriber",), "Decision hub subscribers dropped for falling "
                                                   "behind."),
    "unknown_request_shapes_total": Declared(("kind", "protocol"), "Requests routed past L0 holding an input item, "
                                             "content part, block or role type daari does not know (served as agent "
                                             "turns), by protocol and shape."),
    "shadow_drawn_total": Declared(("kind",), "Answers the shadow sampler's rate drew as candidate samples, by kind "
                                   "(cache, tier)."),
    "shadow_samples_total": Declared(("kind", "level", "outcome"), "Shadow samples compared and recorded, by kind, "
                                     "level and outcome."),
    "shadow_tier_evals_total": Declared(("asked", "outcome", "tier"), "Tier shadow evals recorded, by answering "
                                        "tier, tier asked and outcome."),
    "shadow_skipped_total": Declared(("reason",), "Shadow samples not taken or not finished, by reason."),
    "shadow_demoted_total": Declared((), "L1 entries demoted because a shadow sample disagreed with their answer."),
    "cache_put_conflicts_total": Declared((), "L0 puts that found the key already stored by another daari on the "
                                          "shared cache (the first entry is kept)."),
    "redis_errors_total": Declared(("kind", "link"), "Redis commands that failed or were not sent because Redis was "
                                   "down, by link and kind (cache.backend: redis)."),
    "redis_reconnects_total": Declared(("link",), "Times the link found Redis answering again after it was down."),
    "org_cache_lookups_total": Declared(("level", "result"), "Org cache lookups after a local miss, by level "
                                        "(L0-org, L1-org) and result (hit, shared_hit, miss, unavailable; L1-org: "
                                        "loading, the tenant's index was not ready and the request did not wait).",
                                        (("L0-org", "hit"), ("L0-org", "miss"))),
    "org_cache_writes_total": Declared(("result",), "Answers offered to the org cache, by result (stored, kept: "
                                       "another daari stored it first, unavailable, dropped: too many pending)."),
    "org_cache_shares_total": Declared(("result",), "Org cache entries marked shareable (X-Daari-Org-Share), by result "
                                       "(shared, exists, not_opted_in, refused, failed)."),
    "org_cache_l1_indexes_total": Declared(("event",), "L1-org tenant indexes opened (a tenant's first lookup or "
                                           "write, or its link set up afresh) and dropped (the least recently active "
                                           "past cache.org.l1_key_tenants)."),
    "org_cache_setups_total": Declared(("result",), "Tenant Redis users asked of the org-cache service, by result "
                                       "(ok, refused, failed)."),
    "privacy_secrets_total": Declared(("action", "kind", "tier"), "Secrets found in requests to remote tiers, by "
                                      "tier, kind and action (on: replaced by placeholders, report: only counted)."),
    "privacy_restored_total": Declared(("tier",), "Placeholders in remote answers turned back into the secrets they "
                                       "stand for, by tier."),
    "privacy_withheld_total": Declared(("tier",), "Tool results withheld from remote tiers because they show a "
                                       "privacy.never_send file."),
    "budget_downgrades_total": Declared(("period", "scope"), "Requests sent to a cheaper tier because a spend cap "
                                        "would be crossed, by the cap's scope and period."),
    "budget_refusals_total": Declared(("period", "scope"), "Requests refused (429) because every tier that could "
                                      "answer would cross a spend cap, by the cap's scope and period."),
    "budget_store_failures_total": Declared((), "Priced attempts whose spend could not be written to spend.sqlite "
                                            "(counted in memory)."),
    "budget_cut_off_total": Declared(("source", "tier"), "Priced answers cut off mid-way (the client left, the "
                                     "upstream broke off) whose spend was counted, by how their usage was known "
                                     "(reported, reported_input, estimated)."),
    "budget_unreported_usage_total": Declared(("purpose", "tier"), "Priced calls that finished without reporting "
                                              "their usage, counted from daari's estimates, by purpose (answer, "
                                              "self_check, classifier, verify, shadow, compact) and tier."),
    "otel_spans_exported_total": Declared((), "Decisions exported as OpenTelemetry traces (otel.enabled)."),
    "otel_spans_dropped_total": Declared((), "Decisions not exported because the OTLP queue was full."),
    "otel_export_failures_total": Declared((), "OTLP export requests that failed (their traces are dropped)."),
}
HISTOGRAMS: dict[str, Declared] = {
    "request_duration_seconds": Declared(("tier",), "Time to answer a chat request (until its last byte), by "
                                         "answering tier."),
    "first_byte_seconds": Declared(("tier",), "Time until a chat response started (a stream's first event), by "
                                   "answering tier."),
    "gc_pause_seconds": Declared(("generation",), "Pauses of the process's cyclic garbage collector, by the oldest "
                                 "generation collected (2: a full collection); every task waits for them."),
}
# Counters whose series are the configured tiers (Metrics(tiers=...)): known at start, so present at 0.
TIER_SERIES = ("escalations_total",)
# Scrape-time values (`Sample`s), kept elsewhere and read when /metrics is scraped.
SAMPLES_HELP = {
    "tail_subscribers": "Live-tail websocket clients connected now.",
    "event_loop_tasks": "Tasks on daari's event loop now: back to its baseline once traffic stops, else something "
                        "leaks.",
    "redis_up": "1 while the Redis link answers, else 0 (cache.backend: redis; requests bypass the cache at 0).",
    "actor_restarts_total": "Restarts of each actor since daari started.",
    "actor_up": "1 while the actor runs, else 0.",
    "actor_mailbox_depth": "Messages waiting in the actor's mailbox (not those being handled).",
    "actor_mailbox_capacity": "The actor's mailbox size: asks wait (or are shed with 503) when it is full.",
    "breaker_open": "1 while the tier's circuit breaker is open.",
    "breaker_half_open": "1 while the tier's circuit breaker lets a trial request through.",
    "breaker_consecutive_failures": "Consecutive failures the tier's circuit breaker has counted.",
}
HELP = {**{name: d.help for name, d in (COUNTERS | HISTOGRAMS).items()}, **SAMPLES_HELP}

_UPPER_BOUNDS = (*(float(b) for b in LATENCY_BUCKETS), float("inf"))
# The `le` label of each bucket, as prometheus-client writes it.
_LE: tuple[str, ...] = tuple(floatToGoString(b) for b in _UPPER_BOUNDS)  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class Sample:
    """One scrape-time value: a gauge, or a counter kept elsewhere (`counter=True`)."""

    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)
    counter: bool = False


class CounterFamily:
    """One counter's series, keyed by label values (in `label_names` order). Each series is a cell, `[value]`:
    a per-request caller may hold the cell of a series it updates often and add to `cell[0]` itself."""

    __slots__ = ("name", "label_names", "cells")

    def __init__(self, name: str, label_names: tuple[str, ...]) -> None:
        self.name = name
        self.label_names = label_names
        self.cells: dict[tuple[str, ...], list[float]] = {}

    def inc(self, values: tuple[str, ...], amount: float = 1) -> None:
        """Add `amount` (never negative: the caller's promise, not checked on this path) to series `values`."""
        cell = self.cells.get(values) or self.cell(values)
        cell[0] += amount

    def cell(self, values: tuple[str, ...]) -> list[float]:
        """The cell of series `values`, created at 0 on first use: the page lists it from then on, so create
        it only to count into it (or for a series known from the start)."""
        cell = self.cells.get(values)
        if cell is None:
            _check_arity(self.name, self.label_names, values)
            cell = self.cells[values] = [0.0]
        return cell

    def collect(self) -> Metric:
        family = CounterMetricFamily(PREFIX + self.name, _help(self.name), labels=self.label_names)
        for values, cell in list(self.cells.items()):
            family.add_metric(values, cell[0])
        return family


class HistogramFamily:
    """One latency histogram's series (LATENCY_BUCKETS), keyed by label values; update with `observe`, or hold
    a series (`series(values)`) and `record` into it."""

    __slots__ = ("name", "label_names", "all_series")

    def __init__(self, name: str, label_names: tuple[str, ...]) -> None:
        self.name = name
        self.label_names = label_names
        # Per series: the count of each bucket alone (not cumulative; +Inf last), then the sum of the values.
        self.all_series: dict[tuple[str, ...], list[float]] = {}

    def observe(self, values: tuple[str, ...], seconds: float) -> None:
        record(self.all_series.get(values) or self.series(values), seconds)

    def series(self, values: tuple[str, ...]) -> list[float]:
        """Series `values` (created empty on first use: create it only to record into it)."""
        counts = self.all_series.get(values)
        if counts is None:
            _check_arity(self.name, self.label_names, values)
            counts = self.all_series[values] = [0] * len(_UPPER_BOUNDS) + [0.0]
        return counts

    def collect(self) -> Metric:
        family = HistogramMetricFamily(PREFIX + self.name, _help(self.name), labels=self.label_names)
        for values, counts in list(self.all_series.items()):
            cumulative, buckets = 0.0, []
            for le, count in zip(_LE, counts, strict=False):
                cumulative += count
                buckets.append((le, cumulative))
            family.add_metric(values, buckets, counts[-1])
        return family


def record(series: list[float], seconds: float) -> None:
    """One observation into a histogram series (`HistogramFamily.series`)."""
    if seconds == seconds:  # NaN falls in no bucket (as in prometheus-client); it still goes into the sum
        series[bisect_left(_UPPER_BOUNDS, seconds)] += 1  # the first bucket whose bound is >= seconds
    series[-1] += seconds


class Metrics:
    """Every counter and histogram of one server, exposed through prometheus-client at scrape time.

    Counts are plain numbers in dicts keyed by label values, updated on the event loop thread (every caller
    is on it): no lock and no prometheus-client child per update, which cost the L0 hit path microseconds
    a metric. `counter`/`histogram` hand a per-request caller the family (and through it a series' cell) to
    update by label-value tuple; `inc`/`observe` name the metric and its labels. Every family is declared
    (COUNTERS, HISTOGRAMS) and listed from the start, its known series at 0; `tiers` are the configured tiers,
    the known series of the counters in TIER_SERIES.
    """

    def __init__(self, tiers: Sequence[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._counters = {name: CounterFamily(name, d.labels) for name, d in COUNTERS.items()}
        self._histograms = {name: HistogramFamily(name, d.labels) for name, d in HISTOGRAMS.items()}
        for name, family in self._counters.items():
            for values in COUNTERS[name].start or ([()] if not family.label_names else []):
                family.cell(values)
            if name in TIER_SERIES:
                for tier in tiers:
                    family.cell((tier,))
        # The page lists families in the order they are declared.
        self._shown: list[CounterFamily | HistogramFamily] = [*self._counters.values(), *self._histograms.values()]
        # (kind:name, labels as passed) -> (family, label values in its order): `inc` without sorting names.
        self._series: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Any, tuple[str, ...]]] = {}
        self.registry.register(_FamilyCollector(self._shown))

    def counter(self, name: str, label_names: tuple[str, ...] = ()) -> CounterFamily:
        """Counter `name` with `label_names` (sorted); its `inc(values, amount)` takes values in that order."""
        family = self._counters.get(name)
        if family is None:
            raise ValueError(f"counter {name} is not declared (daari/metrics.py COUNTERS)")
        _check_labels(name, family.label_names, label_names)
        return family

    def histogram(self, name: str, label_names: tuple[str, ...] = ()) -> HistogramFamily:
        """Latency histogram `name` (seconds) with `label_names` (sorted); `observe(values, seconds)`."""
        family = self._histograms.get(name)
        if family is None:
            raise ValueError(f"histogram {name} is not declared (daari/metrics.py HISTOGRAMS)")
        _check_labels(name, family.label_names, label_names)
        return family

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        found = self._series.get(("counter:" + name, tuple(labels.items())))
        if found is None:
            found = self._series[("counter:" + name, tuple(labels.items()))] = self._find(self.counter, name, labels)
        found[0].inc(found[1], amount)

    def observe(self, name: str, value: float, **labels: str) -> None:
        """A latency (seconds) into histogram `name`."""
        found = self._series.get(("histogram:" + name, tuple(labels.items())))
        if found is None:
            found = self._series[("histogram:" + name, tuple(labels.items()))] = self._find(
                self.histogram, name, labels)
        found[0].observe(found[1], value)

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

    @staticmethod
    def _find(declare: Callable[[str, tuple[str, ...]], Any], name: str,
              labels: dict[str, str]) -> tuple[Any, tuple[str, ...]]:
        names = tuple(sorted(labels))
        return declare(name, names), tuple(str(labels[n]) for n in names)


class _FamilyCollector(Collector):
    def __init__(self, shown: list[CounterFamily | HistogramFamily]) -> None:
        self.shown = shown

    def collect(self) -> Iterator[Metric]:
        for family in list(self.shown):
            yield family.collect()


def _help(name: str) -> str:
    return HELP.get(name, f"daari {name.replace('_', ' ')}")


def _check_labels(name: str, declared: tuple[str, ...], names: tuple[str, ...]) -> None:
    if names != declared:
        raise ValueError(f"metric {name} has labels {list(declared)}, got {list(names)}")


def _check_arity(name: str, names: tuple[str, ...], values: tuple[str, ...]) -> None:
    if len(values) != len(names):
        raise ValueError(f"metric {name} has labels {list(names)}, got values {list(values)}")


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
