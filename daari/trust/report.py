"""The trust figures of `daari report`, GET /v1/daari/report and the page, from shadow outcome rows (pure).

Per cache level, task type and client: samples, how many the comparison could decide, disagreements among
those, the rate and its Wilson 95% interval. Tier shadow evals: per answering tier, rule and task type, how
often the next tier up agreed. The learned bars are refit from the same rows with the same estimator the
server uses (daari/trust/bars.py), so the report and the server agree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from daari.trust.bars import LearnedBars, Sample
from daari.trust.diversity import COLLAPSED_AT, MIN_QUESTIONS
from daari.trust.wilson import rate

Row = Mapping[str, Any]
CACHE_LEVELS = ("L0", "L1")


def figures(rows: Iterable[Row]) -> dict[str, Any]:
    """samples, decided, undecided, disagreements, rate and its 95% interval (over decided samples)."""
    outcomes = [str(r["outcome"]) for r in rows]
    decided = [o for o in outcomes if o != "undecided"]
    wrong = sum(1 for o in decided if o == "disagree")
    fig = rate(wrong, len(decided))
    return {"samples": len(outcomes), "decided": len(decided), "undecided": len(outcomes) - len(decided),
            "disagreements": wrong, "rate": round(fig.rate, 4), "interval": [round(fig.low, 4), round(fig.high, 4)]}


def _grouped(rows: Iterable[Row], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[str(row.get(key) or "unknown")].append(row)
    return {name: figures(group) for name, group in sorted(groups.items())}


def tier_agreement(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """Per (answering tier, tier asked, rule, task type): how often the tier above agreed."""
    groups: dict[tuple[str, str, str, str], list[Row]] = defaultdict(list)
    for row in rows:
        groups[(str(row["level"]), str(row["asked_tier"]), str(row.get("rule_id") or "-"),
                str(row.get("task_type") or "unknown"))].append(row)
    out = []
    for (level, asked, rule, task), group in sorted(groups.items()):
        fig = figures(group)
        agreed = fig["decided"] - fig["disagreements"]
        agreement = rate(agreed, fig["decided"])
        out.append({"tier": level, "asked": asked, "rule_id": rule, "task_type": task, "samples": fig["samples"],
                    "decided": fig["decided"], "agreements": agreed, "agreement_rate": round(agreement.rate, 4),
                    "interval": [round(agreement.low, 4), round(agreement.high, 4)]})
    return out


def bars_from_rows(rows: Iterable[Row], floor: float, bound: float | None) -> LearnedBars:
    samples: dict[str, list[Sample]] = defaultdict(list)
    for row in rows:
        if row["kind"] == "cache" and row["level"] == "L1" and row.get("similarity") is not None \
                and row["outcome"] in ("agree", "disagree"):
            samples[str(row.get("task_type") or "unknown")].append(
                Sample(float(row["similarity"]), row["outcome"] == "disagree"))
    bars = LearnedBars(floor, bound)
    bars.fit(samples)
    return bars


def summarize_trust(rows: Sequence[Row], skips: Mapping[str, int], diversity: Sequence[Mapping[str, Any]],
                    learned_bars: Mapping[str, Any]) -> dict[str, Any]:
    """`shadow` (per cache level) and `trust` (the rest) for the report. `learned_bars`: the server's bars in
    force, or (`daari report`, no server) `bars_from_rows` over every stored sample."""
    cache = [r for r in rows if r["kind"] == "cache"]
    tier = [r for r in rows if r["kind"] == "tier"]
    return {
        "shadow": {level: figures(r for r in cache if r["level"] == level) for level in CACHE_LEVELS},
        "trust": {
            "by_task_type": _grouped(cache, "task_type"),
            "by_client": _grouped(cache, "client"),
            "demoted": sum(1 for r in cache if r.get("demoted")),
            "tokens_spent": sum(int(r.get("tokens") or 0) for r in rows),
            "skipped": dict(sorted(skips.items())),
            "tier_agreement": tier_agreement(tier),
            "learned_bars": dict(learned_bars),
            "diversity": [dict(d) for d in diversity],
        },
    }


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def render_trust(report: Mapping[str, Any]) -> list[str]:
    """The plain-text lines `daari report` prints under its table."""
    lines = ["", "cache trust (shadow samples: a fresh answer compared with the cached one)"]
    for level, fig in report["shadow"].items():
        low, high = fig["interval"]
        lines.append(f"  {level} false-hit rate {_pct(fig['rate'])} (95% {_pct(low)}-{_pct(high)}; "
                     f"{fig['disagreements']} of {fig['decided']} decided, {fig['samples']} sampled)")
    trust = report["trust"]
    lines.append(f"  demoted L1 entries {trust['demoted']}; shadow tokens {trust['tokens_spent']}")
    if trust["skipped"]:
        lines.append("  skipped " + ", ".join(f"{k} {v}" for k, v in trust["skipped"].items()))
    raised = {t: b for t, b in trust["learned_bars"]["by_task_type"].items() if b["raised"]}
    floor = trust["learned_bars"]["floor"]
    lines.append(f"  learned L1 bars (floor {floor}): " + (", ".join(f"{t} {b['bar']}" for t, b in raised.items())
                                                         or "none raised"))
    for row in trust["tier_agreement"]:
        lines.append(f"  {row['tier']}>{row['asked']} {row['rule_id']} {row['task_type']}: agreed "
                     f"{row['agreements']}/{row['decided']} ({_pct(row['agreement_rate'])})")
    collapsed = [d["task_type"] for d in trust["diversity"] if d.get("questions", 0) >= MIN_QUESTIONS
                 and d["answers"] / max(1, d["questions"]) <= COLLAPSED_AT]
    if trust["diversity"]:
        lines.append("  diversity " + ", ".join(f"{d['task_type']} {d['answers']}/{d['questions']}"
                                               for d in trust["diversity"])
                     + (f" (collapsed: {', '.join(collapsed)})" if collapsed else ""))
    return lines
