"""GET /v1/daari/budget: the caps, the spend so far in this UTC day and month (overall, by project, by client) and
each cap's state for the overall scope (docs/budget.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daari.budget.caps import Cap, periods, seconds_to_reset
from daari.budget.ledger import Ledger
from daari.config import BudgetConfig
from daari.server.asgi_io import send_json
from daari.server.http_request import HttpRequest


def budget_state(config: BudgetConfig, caps: list[Cap], ledger: Ledger, now: float) -> dict[str, Any]:
    spent = ledger.by_scope(now)
    rows: list[dict[str, Any]] = []
    for cap in caps:
        names = spent[cap.period][cap.scope] if cap.scope != "all" else {"": spent[cap.period]["all"].get("", 0.0)}
        for name, usd in sorted(names.items()):
            state = "over" if usd >= cap.usd else "soft" if usd >= config.soft_ratio * cap.usd else "ok"
            rows.append({"scope": cap.scope, "name": name or None, "period": cap.period, "cap_usd": cap.usd,
                         "spent_usd": round(usd, 6), "remaining_usd": round(max(0.0, cap.usd - usd), 6),
                         "state": state, "resets_in_s": round(seconds_to_reset(cap, now))})
    return {"periods": periods(now), "soft_ratio": config.soft_ratio, "caps": rows, "spent_usd": spent}


class BudgetRoute:
    def __init__(self, config: BudgetConfig, caps: list[Cap], ledger: Ledger, clock: Callable[[], float]) -> None:
        self.config = config
        self.caps = caps
        self.ledger = ledger
        self.clock = clock

    async def __call__(self, req: HttpRequest) -> None:
        await send_json(req.send, 200, budget_state(self.config, self.caps, self.ledger, self.clock()))
