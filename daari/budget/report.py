"""`daari report`'s spend section: what was paid for, by project, client, session, tier and purpose (the answers,
and the side calls: self-checks, classifier questions, the verifier's, shadow calls), from spend.sqlite rows (pure
functions over the rows, and a read-only reader of the file). A row's `requests` column counts paid calls: a
request that escalated from one priced tier to another is one call at each."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from daari.budget.ledger import SPEND_FILE, SpendRow, table_columns

TOP = 10
KEYS = ("project", "client", "session", "tier", "purpose")


def read_spend(data_dir: str, since_day: str) -> list[SpendRow]:
    """Rows from `since_day` on; none when daari never recorded spend there. Read-only: never creates the file, nor
    upgrades an older one (its rows, from before `purpose`, are all answers')."""
    path = Path(data_dir) / SPEND_FILE
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        purpose = "purpose" if "purpose" in table_columns(conn) else "'answer'"
        return list(conn.execute(f"SELECT day, project, client, session, tier, usd, requests, {purpose} FROM spend "
                                 "WHERE day >= ? ORDER BY day", (since_day,)))
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def _top(totals: Mapping[str, list[float]]) -> dict[str, dict[str, float]]:
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:TOP]
    return {name or "(none)": {"usd": round(usd, 6), "calls": int(calls)} for name, (usd, calls) in ranked}


def spend_summary(rows: Sequence[SpendRow]) -> dict[str, Any]:
    by: dict[str, defaultdict[str, list[float]]] = {k: defaultdict(lambda: [0.0, 0.0])
                                                   for k in KEYS}
    total = 0.0
    for _day, project, client, session, tier, usd, calls, purpose in rows:
        total += usd
        for key, name in (("project", project), ("client", client), ("session", session), ("tier", tier),
                          ("purpose", purpose)):
            by[key][name][0] += usd
            by[key][name][1] += calls
    return {"total_usd": round(total, 6), **{f"by_{key}": _top(values) for key, values in by.items()}}


def render_spend(summary: Mapping[str, Any]) -> str:
    lines = [f"spend            ${summary['total_usd']:.4f} paid to priced tiers (spend.sqlite, whole UTC days)"]
    for key in KEYS:
        for name, figures in summary[f"by_{key}"].items():
            lines.append(f"  {key:<8} {name[-48:]:<48} ${figures['usd']:>9.4f} {figures['calls']:>6} paid calls")
    return "\n".join(lines)
