"""`daari report`: summarise decision-log rows (pure), and render the summary as a terminal table.

Every figure is computed from the rows alone, so a log seeded with known rows gives known figures. A request
whose client left before its answer was finished (status 499, `client_disconnected`) is `abandoned`, counted
apart from errors: `claude -p` exits before its title call ends, and that is not a failure of daari.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from daari.pipeline.decision import outcome

TIER_ORDER = ("L0", "L0-org", "L1", "CCS", "L2", "Lt", "L3", "L4", "L5", "L6")
_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

Row = Mapping[str, Any]


def parse_since(text: str) -> float:
    """'24h', '30m', '7d' -> seconds."""
    match = _SINCE.match(text)
    if match is None:
        raise ValueError(f"--since takes a number and a unit (s, m, h, d, w), e.g. 24h; got {text!r}")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0-100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


MODEL_TIERS = ("L3", "L4", "L5", "L6")
TOP_SESSIONS = 10


def _cache_figures(rows: Sequence[Row]) -> dict[str, Any]:
    """Input tokens answered by model tiers, how many were read from a provider cache, what was lost."""
    prompt = sum(int(r.get("input_tokens") or 0) for r in rows)
    read = sum(int(r.get("cache_read_tokens") or 0) for r in rows)
    return {"requests": len(rows), "input_tokens": prompt, "cache_read_tokens": read,
            "cache_read_share": _share(read, prompt),
            "lost_cache_usd": round(sum(float(r.get("lost_cache_usd") or 0) for r in rows), 6)}


def session_summary(answered: Sequence[Row]) -> dict[str, Any]:
    """Provider prompt caches, overall and per session (docs/observability.md, "Sessions and provider caches"):
    the cache-read share of the input tokens model tiers answered, and what answers that left a warm cache cost
    (all of them, and those that were escalations)."""
    model_rows = [r for r in answered if r.get("tier") in MODEL_TIERS]
    by_session: dict[str, list[Row]] = {}
    for row in model_rows:
        if row.get("session"):
            by_session.setdefault(str(row["session"]), []).append(row)
    sessions = sorted(((key, _cache_figures(group)) for key, group in by_session.items()),
                      key=lambda item: -item[1]["input_tokens"])
    escalated = [r for r in model_rows if r.get("escalated_from")]
    return {**_cache_figures(model_rows),
            "escalation_lost_cache_usd": round(sum(float(r.get("lost_cache_usd") or 0) for r in escalated), 6),
            "sessions": len(by_session), "top": dict(sessions[:TOP_SESSIONS])}


def project_summary(answered: Sequence[Row], top: int = 10) -> dict[str, dict[str, Any]]:
    """Requests, cost and saving (against sending every one to L6) per project (docs/budget.md), the costliest
    first; rows without a project (no X-Daari-Repo, no stated working directory) under ""."""
    totals: dict[str, list[float]] = {}
    for row in answered:
        figures = totals.setdefault(str(row.get("project") or ""), [0, 0.0, 0.0])
        figures[0] += 1
        figures[1] += float(row.get("cost_usd") or 0)
        figures[2] += float(row.get("saved_usd") or 0)
    ranked = sorted(totals.items(), key=lambda item: (-item[1][1], -item[1][0]))[:top]
    return {name: {"requests": int(n), "cost_usd": round(cost, 6), "saved_usd": round(saved, 6)}
            for name, (n, cost, saved) in ranked}


def summarize(rows: Sequence[Row], *, false_hits_avoided: int | None = None) -> dict[str, Any]:
    """The report's figures. `false_hits_avoided` from metrics when given, else counted from the rows."""
    answered = [r for r in rows if r.get("tier") and not r.get("error")]
    abandoned = sum(1 for r in rows if outcome(r.get("error"), r.get("status")) == "abandoned")
    total = len(rows)
    by_tier: dict[str, list[Row]] = {}
    for row in answered:
        by_tier.setdefault(str(row["tier"]), []).append(row)
    tiers: dict[str, Any] = {}
    for tier in sorted(by_tier, key=lambda t: TIER_ORDER.index(t) if t in TIER_ORDER else len(TIER_ORDER)):
        latencies = [float(r["latency_ms"]) for r in by_tier[tier] if r.get("latency_ms") is not None]
        tiers[tier] = {"requests": len(by_tier[tier]), "share": _share(len(by_tier[tier]), len(answered)),
                       "p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95)}
    looked_up = [r for r in rows if r.get("cache") in ("hit", "miss")]
    l0_hits = sum(1 for r in looked_up if r.get("cache") == "hit" and r.get("tier") == "L0")
    # An L1 lookup: a hit, a candidate judged (a verdict with its similarity) or a miss (rows since the `l1`
    # column; older rows counted only judged candidates). Requests L1 skipped (loading, unavailable) are not.
    l1_asked = [r for r in looked_up if r.get("tier") == "L1" or r.get("verdict") is not None
                or r.get("similarity") is not None or r.get("l1") == "miss"]
    l1_hits = sum(1 for r in l1_asked if r.get("tier") == "L1")
    escalated = sum(1 for r in answered if r.get("escalated_from"))
    avoided = false_hits_avoided if false_hits_avoided is not None else sum(
        1 for r in rows if r.get("verdict") == "rejected")
    cost = sum(float(r.get("cost_usd") or 0) for r in answered)
    all_l6 = sum(float(r.get("cost_l6_usd") or 0) for r in answered)
    return {
        "requests": total,
        "answered": len(answered),
        "errors": total - len(answered) - abandoned,
        "abandoned": abandoned,
        "tiers": tiers,
        "cache": {
            "L0": {"lookups": len(looked_up), "hits": l0_hits, "hit_rate": _share(l0_hits, len(looked_up))},
            "L1": {"lookups": len(l1_asked), "hits": l1_hits, "hit_rate": _share(l1_hits, len(l1_asked))},
        },
        "false_hits_avoided": avoided,
        "escalation_rate": _share(escalated, len(answered)),
        "cost": {"actual_usd": round(cost, 6), "all_l6_usd": round(all_l6, 6),
                 "saved_usd": round(all_l6 - cost, 6)},
        "provider_cache": session_summary(answered),
        "top_task_types": Counter(str(r.get("task_type")) for r in answered if r.get("task_type")).most_common(5),
        "top_clients": Counter(str(r.get("client") or "unknown") for r in rows).most_common(5),
        "projects": project_summary(answered),
        # docs/privacy.md: what never reached a remote tier
        "privacy": {"secrets_redacted": sum(int(r.get("secrets_redacted") or 0) for r in rows),
                    "results_withheld": sum(int(r.get("results_withheld") or 0) for r in rows),
                    "requests": sum(1 for r in rows if r.get("secrets_redacted") or r.get("results_withheld"))},
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render_text(report: Mapping[str, Any], since: str) -> str:
    """A plain-text table (what `rich` prints when it is not a terminal too)."""
    lines = [f"daari report, last {since}: {report['requests']} requests, {report['errors']} errors, "
             f"{report['abandoned']} abandoned (the client left first)", "",
             f"{'tier':<5} {'requests':>9} {'share':>7} {'p50 ms':>9} {'p95 ms':>9}"]
    for tier, t in report["tiers"].items():
        lines.append(f"{tier:<5} {t['requests']:>9} {t['share'] * 100:>6.1f}% {_ms(t['p50_ms']):>9} "
                     f"{_ms(t['p95_ms']):>9}")
    cache = report["cache"]
    cost = report["cost"]
    lines += ["",
              f"L0 hit rate      {cache['L0']['hit_rate'] * 100:.1f}% ({cache['L0']['hits']}/{cache['L0']['lookups']})",
              f"L1 hit rate      {cache['L1']['hit_rate'] * 100:.1f}% ({cache['L1']['hits']}/{cache['L1']['lookups']})",
              f"false hits avoided {report['false_hits_avoided']}",
              f"escalation rate  {report['escalation_rate'] * 100:.1f}%",
              f"cost             ${cost['actual_usd']:.4f} (all at L6: ${cost['all_l6_usd']:.4f}; "
              f"saved ${cost['saved_usd']:.4f})",
              "top task types   " + (", ".join(f"{k} {v}" for k, v in report["top_task_types"]) or "-"),
              "top clients      " + (", ".join(f"{k} {v}" for k, v in report["top_clients"]) or "-")]
    projects = report.get("projects") or {}
    if any(projects):
        lines += ["", f"{'project':<48} {'requests':>8} {'cost $':>10} {'saved $':>10}"]
        for name, figures in projects.items():
            lines.append(f"{(name or '(none)')[-48:]:<48} {figures['requests']:>8} {figures['cost_usd']:>10.4f} "
                         f"{figures['saved_usd']:>10.4f}")
    privacy = report.get("privacy")
    if privacy and privacy["requests"]:
        lines.append(f"privacy          {privacy['secrets_redacted']} secrets redacted, {privacy['results_withheld']} "
                     f"tool results withheld, in {privacy['requests']} requests to remote tiers")
    provider = report.get("provider_cache")
    if provider and provider["input_tokens"]:
        lines += ["",
                  f"provider cache   {provider['cache_read_share'] * 100:.1f}% of {provider['input_tokens']} input "
                  f"tokens read from cache; lost cache ${provider['lost_cache_usd']:.4f} "
                  f"(escalations ${provider['escalation_lost_cache_usd']:.4f})",
                  f"{'session':<17} {'requests':>8} {'input':>10} {'cached':>7} {'lost $':>9}"]
        for key, figures in provider["top"].items():
            lines.append(f"{key:<17} {figures['requests']:>8} {figures['input_tokens']:>10} "
                         f"{figures['cache_read_share'] * 100:>6.1f}% {figures['lost_cache_usd']:>9.4f}")
    if "shadow" in report:
        from daari.trust.report import render_trust

        lines += render_trust(report)
    return "\n".join(lines)
