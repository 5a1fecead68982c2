"""Budget caps and the verdict on one more request: pure functions over the spend so far.

A cap is a limit in the price table's currency for one scope (everything, each project, each client) and one
period (the UTC day, the UTC month). A request is judged against every cap that applies to it: `over` when its
estimated cost would cross one, `soft` when it would pass the warning ratio of one, else `ok`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from daari.config import BudgetConfig

Scope = Literal["all", "project", "client"]
Period = Literal["day", "month"]
State = Literal["ok", "soft", "over"]


@dataclass(frozen=True, slots=True)
class Cap:
    scope: Scope
    period: Period
    usd: float


@dataclass(frozen=True, slots=True)
class Verdict:
    state: State
    cap: Cap | None = None  # the cap that decided (the tightest for `over` and `soft`)
    spent: float = 0.0  # spent in that cap's scope and period before this request


def caps_of(config: BudgetConfig) -> list[Cap]:
    caps: list[Cap] = []
    for scope, limits in (("all", config), ("project", config.project), ("client", config.client)):
        for period in ("day", "month"):
            usd = getattr(limits, f"{'daily' if period == 'day' else 'monthly'}_usd")
            if usd is not None:
                caps.append(Cap(scope, period, usd))  # type: ignore[arg-type]
    return caps


def periods(now: float) -> dict[Period, str]:
    """The UTC day and month `now` falls in, as ledger keys ("2026-12-01", "2026-12")."""
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    return {"day": day, "month": day[:7]}


def seconds_to_reset(cap: Cap, now: float) -> float:
    """Until the cap's period ends (UTC midnight, or the first of next month)."""
    tm = time.gmtime(now)
    if cap.period == "day":
        return 86400 - (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec)
    year, month = (tm.tm_year + 1, 1) if tm.tm_mon == 12 else (tm.tm_year, tm.tm_mon + 1)
    start_next = time.mktime((year, month, 1, 0, 0, 0, 0, 0, 0)) - time.timezone
    return max(1.0, start_next - now)


SpentOf = Callable[[Cap], float]  # spend so far in the cap's scope (for this request's project/client) and period


def judge(caps: list[Cap], spent_of: SpentOf, estimate: float, soft_ratio: float) -> Verdict:
    """The verdict on a request estimated to cost `estimate` against every cap."""
    worst = Verdict("ok")
    for cap in caps:
        spent = spent_of(cap)
        if spent + estimate > cap.usd:
            state: State = "over"
        elif spent + estimate >= soft_ratio * cap.usd:
            state = "soft"
        else:
            continue
        rank = {"ok": 0, "soft": 1, "over": 2}
        if rank[state] > rank[worst.state] or (
                state == worst.state and worst.cap is not None and cap.usd - spent < worst.cap.usd - worst.spent):
            worst = Verdict(state, cap, spent)
    return worst
