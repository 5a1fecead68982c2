"""Routing spec step 4, the command context store tier (CCS): a command's recent result answered from the store.

Reads: the final user message (a DEV-06 question, or a repeat of a command whose result is still fresh), the
X-Daari-Rerun-Command and X-Daari-No-Cache headers. Decides: the stored result as the answer (tools/render.py).
"""

from __future__ import annotations

import time

from actors.tool_runner import CcsGet
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.pipeline.steps.tool_service import Prepared, ToolService, flag, tool_answer
from daari.tools.ccs_store import CcsEntry
from daari.tools.render import render_cached, render_no_context


def _cached(entry: CcsEntry, rule_id: str, confidence: float) -> ShortcutResult:
    text = render_cached(entry.command, entry.repo_root, entry.exit_code, time.time() - entry.created_at,
                         entry.duration_ms, entry.summary, entry.log_path)
    return tool_answer("CCS", rule_id, text, {"command": entry.command, "exit_code": entry.exit_code,
                                          "duration_ms": entry.duration_ms, "ccs_hit": True,
                                          "log_path": entry.log_path}, confidence)


class CcsTier:
    name = "CCS"
    serves_agent_turns = False

    def __init__(self, service: ToolService) -> None:
        self.service = service

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        if flag(query.headers, "x-daari-rerun-command") or not self.service.config.ccs.enabled:
            return None
        prepared = await self.service.prepare(query)
        if not isinstance(prepared, Prepared):
            return None  # the Lt tier reports a decline once
        match, plan = prepared.match, prepared.plan
        reads = match.intent == "ccs_read"
        # X-Daari-No-Cache asks for nothing stored: a repeat runs again (DEV-06 is a read by definition).
        fresh = flag(query.headers, "x-daari-no-cache")
        if not reads and (fresh or match.intent == "rerun" or plan.ttl_s <= 0 or plan.destructive):
            return None
        entry = await self.service.runner.call(CcsGet(plan.ccs_key))
        if entry is not None:
            return _cached(entry, match.rule_id, match.confidence)
        if not reads:
            return None
        return tool_answer("CCS", match.rule_id, render_no_context(plan.display, str(plan.cwd), plan.ttl_s),
                       {"command": plan.display, "exit_code": None, "duration_ms": 0, "ccs_hit": False,
                        "log_path": None}, match.confidence)
