"""Counters and a latency summary, exposed as Prometheus text at GET /metrics."""

from __future__ import annotations

from collections import Counter


class Metrics:
    def __init__(self) -> None:
        self.counters: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        self.counters[(name, tuple(sorted(labels.items())))] += amount

    def render(self, gauges: dict[str, float] | None = None) -> str:
        lines = []
        for (name, labels), value in sorted(self.counters.items()):
            label_text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"daari_{name}{{{label_text}}} {value:g}" if labels else f"daari_{name} {value:g}")
        for name, value in sorted((gauges or {}).items()):
            lines.append(f"daari_{name} {value:g}")
        return "\n".join(lines) + "\n"
