"""Budget caps and the verdict on one more request: pure functions over the spend so far.

A cap is a limit in the price table's currency for one scope (everything, each project, each client) and one
period (the UTC day, the UTC month); a named project or client may have its own caps instead of the generic ones
(`budget.projects`, `budget.clients`). A request is judged against every cap that applies to it: `over` when its
estimated cost would cross one, `soft` when it would pass the warning ratio of one, else `ok`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from daari.config import BudgetConfig, SpendLimits

Scope = Literal["all", "project", "client"]
Period = Literal["day", "month"]
State = Literal["ok", "soft", "over"]


@dataclass(frozen=True, slots=True)
class Cap:
    scope: Scope
    period: Period
    usd: float
    name: str | None = None  # a named project's or client's own cap (its key in budget.projects or .clients)


@dataclass(frozen=True, slots=True)
class Verdict:
    state: State
    cap: Cap | None = None  # the cap that decided (the tightest for `over` and `soft`)
    spent: float = 0.0  # spent in that cap's scope and period before this request


def _caps(scope: Scope, limits: BudgetConfig | SpendLimits, name: str | None = None) -> tuple[Cap, ...]:
    periods_usd: tuple[tuple[Period, float | None], ...] = (("day", limits.daily_usd), ("month", limits.monthly_usd))
    return tuple(Cap(scope, period, usd, name) for period, usd in periods_usd if usd is not None)


def project_key(key: str) -> str:
    """A `budget.projects` key as it is matched: a path normalised (`~` expanded, no trailing `/`), or a bare name
    (matched against the project's last path part)."""
    return os.path.normpath(os.path.expanduser(key)) if "/" in key or key.startswith("~") else key


@dataclass(frozen=True)
class Caps:
    """Every configured cap: the generic ones (overall, each project, each client), and the named projects' and
    clients' own, which replace the generic project or client caps for that one (a period it leaves null is
    uncapped for it)."""

    generic: tuple[Cap, ...] = ()
    projects: Mapping[str, tuple[Cap, ...]] = field(default_factory=dict)  # matched key -> its own caps
    clients: Mapping[str, tuple[Cap, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.generic) or any(self.projects.values()) or any(self.clients.values())

    def all(self) -> list[Cap]:
        return [*self.generic, *(c for caps in self.projects.values() for c in caps),
                *(c for caps in self.clients.values() for c in caps)]

    def project_entry(self, project: str) -> str | None:
        """The `budget.projects` key naming `project` (a git root path): the path itself, else its last part."""
        if not project or not self.projects:
            return None
        if project in self.projects:
            return project
        base = os.path.basename(project)
        return base if base in self.projects else None

    def for_request(self, project: str, client: str) -> list[Cap]:
        """The caps that apply to a request of `project` and `client`."""
        named_project = self.project_entry(project)
        named_client = client if client in self.clients else None
        caps = [c for c in self.generic if c.scope == "all" or (c.scope == "project" and named_project is None)
                or (c.scope == "client" and named_client is None)]
        if named_project is not None:
            caps += self.projects[named_project]
        if named_client is not None:
            caps += self.clients[named_client]
        return caps


def caps_of(config: BudgetConfig) -> Caps:
    return Caps(
        generic=(*_caps("all", config), *_caps("project", config.project), *_caps("client", config.client)),
        projects={project_key(k): _caps("project", v, project_key(k)) for k, v in config.projects.items()},
        clients={k: _caps("client", v, k) for k, v in config.clients.items()})


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
