"""The tool tiers: CCS (answers from the command context store) and Lt (runs the command; L2-dev rules too).

Mapping of the routing spec onto the pipeline's shortcut order (CCS, L1, L2, Lt): DEV-06 and a fresh
repeat of a command whose result is still in the store are answered by the CCS tier; every rule that
decides an execution (DEV-01..05, DEV-07, DEV-08, LT-01..06) is answered by the Lt tier, reporting its own
rule id. Neither ever sees an agent turn (the pipeline guarantees it; `serves_agent_turns` stays False).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio

from actors.runtime import Address
from actors.tool_runner import CcsGet, CcsInvalidate, RunCommand, RunRefused
from daari.config import ToolsConfig
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult
from daari.protocol.chat import Completion
from daari.rules.tier import last_user_text
from daari.tools.ccs_store import CcsEntry
from daari.tools.patterns import CommandMatch, best_command
from daari.tools.plan import CommandPlan, Unavailable, plan_command
from daari.tools.policy import Refused, resolve_repo
from daari.tools.render import render_cached, render_confirmation, render_no_context, render_run

TOOLS_MODEL = "daari-tools"


def _flag(headers: Mapping[str, str], name: str) -> bool:
    return headers.get(name, "").strip().lower() == "true"


@dataclass(frozen=True)
class Prepared:
    match: CommandMatch
    plan: CommandPlan


class ToolService:
    """What both tiers share: the match, the repository, the plan, and the runner's address."""

    def __init__(self, config: ToolsConfig, runner: Address, base_env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.runner = runner
        self.base_env = dict(os.environ if base_env is None else base_env)
        # The CCS tier and then the Lt tier ask about the same query: the second asks for free.
        self._last: tuple[ShortcutQuery, Prepared | ShortcutResult | None] | None = None

    async def prepare(self, query: ShortcutQuery) -> Prepared | ShortcutResult | None:
        """None: not a command. A declined ShortcutResult: a command daari will not run, and why."""
        if self._last is not None and self._last[0] is query:
            return self._last[1]
        prepared = await self._prepare(query)
        self._last = (query, prepared)
        return prepared

    async def _prepare(self, query: ShortcutQuery) -> Prepared | ShortcutResult | None:
        text = last_user_text(query.request)
        match = best_command(text) if text is not None else None
        if match is None or match.confidence < self.config.min_confidence:
            return None
        try:
            # Real paths, PATH lookups and commands.yaml: file system work, off the event loop.
            repo = await trio.to_thread.run_sync(resolve_repo, query.headers.get("x-daari-repo"), self.config)
            plan = await trio.to_thread.run_sync(plan_command, match, repo, self.config, self.base_env)
            return Prepared(match, plan)
        except Refused as exc:
            return _declined({"tool_refused": {"rule_id": match.rule_id, "reason": str(exc)}})
        except Unavailable as exc:
            return _declined({"tool_unavailable": {"rule_id": match.rule_id, "tool": exc.tool,
                                                   "reason": exc.reason}})


def _declined(details: dict[str, Any]) -> ShortcutResult:
    return ShortcutResult("Lt", None, confidence=0.0, task_type="tool", details=details)


def _answer(tier: str, rule_id: str, text: str, tool: dict[str, Any], confidence: float,
            **extra: Any) -> ShortcutResult:
    return ShortcutResult(tier, Completion(text=text, model=TOOLS_MODEL), confidence=confidence, task_type="tool",
                          rule_id=rule_id, details={"tool": tool, **extra})


def _cached(entry: CcsEntry, rule_id: str, confidence: float) -> ShortcutResult:
    text = render_cached(entry.command, entry.repo_root, entry.exit_code, time.time() - entry.created_at,
                         entry.duration_ms, entry.summary, entry.log_path)
    return _answer("CCS", rule_id, text, {"command": entry.command, "exit_code": entry.exit_code,
                                          "duration_ms": entry.duration_ms, "ccs_hit": True,
                                          "log_path": entry.log_path}, confidence)


class CcsTier:
    name = "CCS"
    serves_agent_turns = False

    def __init__(self, service: ToolService) -> None:
        self.service = service

    async def answer(self, query: ShortcutQuery) -> ShortcutResult | None:
        if _flag(query.headers, "x-daari-rerun-command") or not self.service.config.ccs.enabled:
            return None
        prepared = await self.service.prepare(query)
        if not isinstance(prepared, Prepared):
            return None  # the Lt tier reports a decline once
        match, plan = prepared.match, prepared.plan
        reads = match.intent == "ccs_read"
        # X-Daari-No-Cache asks for nothing stored: a repeat runs again (DEV-06 is a read by definition).
        fresh = _flag(query.headers, "x-daari-no-cache")
        if not reads and (fresh or match.intent == "rerun" or plan.ttl_s <= 0 or plan.destructive):
            return None
        entry = await self.service.runner.call(CcsGet(plan.ccs_key))
        if entry is not None:
            return _cached(entry, match.rule_id, match.confidence)
        if not reads:
            return None
        return _answer("CCS", match.rule_id, render_no_context(plan.display, str(plan.cwd), plan.ttl_s),
                       {"command": plan.display, "exit_code": None, "duration_ms": 0, "ccs_hit": False,
                        "log_path": None}, match.confidence)

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        return None


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
        if match.intent == "ccs_read" and not _flag(query.headers, "x-daari-rerun-command"):
            return None  # the CCS tier answered it (or was not asked); nothing runs for a question
        tool: dict[str, Any] = {"command": plan.display, "exit_code": None, "duration_ms": 0, "ccs_hit": False,
                                "log_path": None}
        if plan.destructive and not (self.service.config.auto_confirm or _flag(query.headers, "x-daari-confirm-tool")):
            return _answer("Lt", match.rule_id, render_confirmation(plan), tool, match.confidence,
                           confirmation_required=True)
        if match.intent == "rerun":
            await self.service.runner.call(CcsInvalidate(plan.ccs_key))
        # The run is this request's: a client that goes away cancels the call, which kills the command.
        result = await self.service.runner.call(RunCommand(plan))
        if isinstance(result, RunRefused):
            return _declined({"tool_refused": {"rule_id": match.rule_id, "reason": result.reason}})
        tool.update(exit_code=result.exit_code, duration_ms=result.duration_ms, log_path=result.log_path)
        if result.timed_out:
            tool["timed_out"] = True
        text = render_run(plan.display, str(plan.cwd), result.exit_code, result.duration_ms, result.timed_out,
                          result.summary, result.log_path)
        return _answer("Lt", match.rule_id, text, tool, match.confidence)

    async def remember(self, query: ShortcutQuery, completion: Completion, tier: str) -> None:
        return None
