"""Routing spec steps 6 and 8, the tool tier (Lt): the L2-dev rules and Lt patterns that decide a command, run
through the ToolRunnerActor (or a confirmation asked for a destructive one).

Reads: the final user message, X-Daari-Repo, X-Daari-Confirm-Tool, X-Daari-Rerun-Command. Decides: the command's
result as the answer (exit code, output summary, log path), or why it was declined (daari_meta details).
"""

from __future__ import annotations

from typing import Any

from actors.tool_runner import CcsInvalidate, RunCommand, RunRefused
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.pipeline.steps.tool_service import Prepared, ToolService, declined, flag, tool_answer
from daari.tools.render import render_confirmation, render_run


class ToolTier:
    name = "Lt"
    serves_agent_turns = False

    def __init__(self, service: ToolService) -> None:
        self.service = service

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        prepared = await self.service.prepare(query)
        if not isinstance(prepared, Prepared):
            return prepared
        match, plan = prepared.match, prepared.plan
        if match.intent == "ccs_read" and not flag(query.headers, "x-daari-rerun-command"):
            return None  # the CCS tier answered it (or was not asked); nothing runs for a question
        tool: dict[str, Any] = {"command": plan.display, "exit_code": None, "duration_ms": 0, "ccs_hit": False,
                                "log_path": None}
        if plan.destructive and not (self.service.config.auto_confirm or flag(query.headers, "x-daari-confirm-tool")):
            return tool_answer("Lt", match.rule_id, render_confirmation(plan), tool, match.confidence,
                           confirmation_required=True)
        if match.intent == "rerun":
            await self.service.runner.call(CcsInvalidate(plan.ccs_key))
        # The run is this request's: a client that goes away cancels the call, which kills the command.
        result = await self.service.runner.call(RunCommand(plan))
        if isinstance(result, RunRefused):
            return declined({"tool_refused": {"rule_id": match.rule_id, "reason": result.reason}})
        tool.update(exit_code=result.exit_code, duration_ms=result.duration_ms, log_path=result.log_path)
        if result.timed_out:
            tool["timed_out"] = True
        text = render_run(plan.display, str(plan.cwd), result.exit_code, result.duration_ms, result.timed_out,
                          result.summary, result.log_path)
        return tool_answer("Lt", match.rule_id, text, tool, match.confidence)
