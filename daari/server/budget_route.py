"""GET /v1/daari/budget: the caps, the spend so far in this UTC day and month (overall, by project, by client) and
each cap's state for the overall scope (docs/budget.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daari.budget.caps import Cap, Caps, periods, seconds_to_reset
from daari.budget.ledger import Ledger
from daari.config import BudgetConfig
from daari.server.asgi_io import send_json
from daari.server.http_request import HttpRequest


def _spenders(caps: Caps, cap: Cap, spent: dict[str, float]) -> dict[str, float]:
    """Who `cap` holds to, with what they spent: everyone for the overall cap; for a named cap, the projects
    (clients) it names, itself at 0 when none spent yet; for a generic one, every spender without a named cap."""
    if cap.scope == "all":
        return {"": spent.get("", 0.0)}
    if cap.name is not None:
        if cap.scope == "project":
            named = {name: usd for name, usd in spent.items() if caps.project_entry(name) == cap.name}
        else:
            named = {cap.name: spent[cap.name]} if cap.name in spent else {}
        return named or {cap.name: 0.0}
    if cap.scope == "project":
        return {name: usd for name, usd in spent.items() if caps.project_entry(name) is None}
    return {name: usd for name, usd in spent.items() if name not in caps.clients}


def budget_state(config: BudgetConfig, caps: Caps, ledger: Ledger, now: float) -> dict[str, Any]:
    spent = ledger.by_scope(now)
    rows: list[dict[str, Any]] = []
    for cap in caps.all():
        for name, usd in sorted(_spenders(caps, cap, spent[cap.period][cap.scope]).items()):
            state = "over" if usd >= cap.usd else "soft" if usd >= config.soft_ratio * cap.usd else "ok"
            rows.append({"scope": cap.scope, "name": name or None, "named": cap.name is not None,
                         "period": cap.period, "cap_usd": cap.usd,
                         "spent_usd": round(usd, 6), "remaining_usd": round(max(0.0, cap.usd - usd), 6),
                         "state": state, "resets_in_s": round(seconds_to_reset(cap, now))})
    return {"periods": periods(now), "soft_ratio": config.soft_ratio, "caps": rows, "spent_usd": spent}


class BudgetRoute:
    def __init__(self, config: BudgetConfig, caps: Caps, ledger: Ledger, clock: Callable[[], float]) -> None:
        self.config = config
        self.caps = caps
        self.ledger = ledger
        self.clock = clock

    async def __call__(self, req: HttpRequest) -> None:
        await send_json(req.send, 200, budget_state(self.config, self.caps, self.ledger, self.clock()))
