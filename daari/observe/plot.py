"""`daari report --plot`: the tier mix over time and latency per tier, drawn headless with matplotlib."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from daari.observe.report import TIER_ORDER


def _buckets(rows: Sequence[Mapping[str, Any]], count: int) -> tuple[list[float], dict[str, list[int]]]:
    times = [float(r["time"]) for r in rows]
    start, end = min(times), max(times)
    width = max((end - start) / count, 1e-9)
    tiers = [t for t in TIER_ORDER if any(r.get("tier") == t for r in rows)]
    mix = {t: [0] * count for t in tiers}
    for row in rows:
        tier = row.get("tier")
        if tier in mix:
            index = min(int((float(row["time"]) - start) / width), count - 1)
            mix[str(tier)][index] += 1
    return [start + width * (i + 0.5) for i in range(count)], mix


def plot_report(rows: Sequence[Mapping[str, Any]], path: Path, buckets: int = 24) -> None:
    import matplotlib

    matplotlib.use("Agg")  # headless: no display, no GUI toolkit
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    answered = [r for r in rows if r.get("tier") and not r.get("error")]
    figure, (mix_axes, latency_axes) = plt.subplots(2, 1, figsize=(9, 7))
    if answered:
        centers, mix = _buckets(answered, buckets)
        days = [mdates.epoch2num(c) if hasattr(mdates, "epoch2num") else c / 86400.0 for c in centers]
        mix_axes.stackplot(days, *mix.values(), labels=list(mix))
        mix_axes.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))  # type: ignore[no-untyped-call]
        mix_axes.legend(loc="upper left", fontsize="small")
        tiers = [t for t in TIER_ORDER if t in mix]
        latencies = [[float(r["latency_ms"]) for r in answered if r.get("tier") == t and r.get("latency_ms")
                      is not None] or [0.0] for t in tiers]
        latency_axes.boxplot(latencies, tick_labels=tiers, showfliers=False)
        latency_axes.set_yscale("symlog")
    else:
        mix_axes.text(0.5, 0.5, "no decisions in this period", ha="center", va="center")
    mix_axes.set_title("Requests per tier over time")
    mix_axes.set_ylabel("requests")
    latency_axes.set_title("Latency per tier (ms)")
    latency_axes.set_ylabel("ms")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
