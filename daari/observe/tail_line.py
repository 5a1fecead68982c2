"""One terminal line per decision for `daari tail`: time, tier, cache, task type, latency, rule, path."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

_RESET = "\x1b[0m"
_TIER_COLOR = {"L0": "\x1b[32m", "L1": "\x1b[36m", "CCS": "\x1b[36m", "L2": "\x1b[34m", "Lt": "\x1b[34m",
               "L3": "\x1b[33m", "L4": "\x1b[33m", "L5": "\x1b[35m", "L6": "\x1b[31m"}
_ERROR = "\x1b[1;31m"


def format_decision(decision: Mapping[str, Any], *, color: bool) -> str:
    ts = decision.get("time")
    clock = time.strftime("%H:%M:%S", time.localtime(float(ts))) if ts is not None else "--:--:--"
    tier = str(decision.get("tier") or "-")
    cache = str(decision.get("cache") or "-")
    latency = decision.get("latency_ms")
    parts = [clock, f"{tier:<4}", f"{cache:<6}", f"{str(decision.get('task_type') or '-'):<15}",
             f"{latency:>9.1f}ms" if isinstance(latency, int | float) else f"{'-':>11}",
             f"{str(decision.get('rule_id') or '-'):<8}"]
    escalated = decision.get("escalated_from")
    if escalated:
        path = escalated if isinstance(escalated, str) else "->".join(map(str, escalated))
        parts.append(f"{path}->{tier}")
    if decision.get("agent_turn"):
        parts.append("agent")
    prompt_hash = decision.get("prompt_hash")
    if prompt_hash:
        parts.append(f"#{str(prompt_hash)[:8]}")
    error = decision.get("error")
    if error:
        parts.append(f"error={error}")
    line = " ".join(parts)
    if not color:
        return line
    shade = _ERROR if error else _TIER_COLOR.get(tier, "")
    return f"{shade}{line}{_RESET}" if shade else line
