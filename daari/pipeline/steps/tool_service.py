"""What the two tool tiers share (steps/ccs.py and steps/lt.py): the command match, the repository, the plan,
and the ToolRunnerActor's address.

Mapping of the routing spec onto the pipeline's shortcut order (CCS, L1, L2, Lt): DEV-06 and a fresh
repeat of a command whose result is still in the store are answered by the CCS tier; every rule that
decides an execution (DEV-01..05, DEV-07, DEV-08, LT-01..06: the L2-dev rules and Lt's) is answered by the Lt
tier, reporting its own rule id. Neither ever sees an agent turn (the shortcut step guarantees it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio

from actors.runtime import Address
from daari.config import ToolsConfig
from daari.pipeline.shortcuts import ShortcutQuery, ShortcutResult, final_user_text
from daari.protocol.chat import Completion
from daari.tools.patterns import CommandMatch, best_command
from daari.tools.plan import CommandPlan, Unavailable, plan_command
from daari.tools.policy import Refused, resolve_repo

TOOLS_MODEL = "daari-tools"


def flag(headers: Mapping[str, str], name: str) -> bool:
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
        # The CCS tier and then the Lt tier ask about the same request: the second asks for free.
        self._last: tuple[ShortcutQuery, Prepared | ShortcutResult | None] | None = None

    async def prepare(self, query: ShortcutQuery) -> Prepared | ShortcutResult | None:
        """None: not a command. A declined ShortcutResult: a command daari will not run, and why."""
        if self._last is not None and self._last[0].request is query.request:
            return self._last[1]
        prepared = await self._prepare(query)
        self._last = (query, prepared)
        return prepared

    async def _prepare(self, query: ShortcutQuery) -> Prepared | ShortcutResult | None:
        text = final_user_text(query.request)
        match = best_command(text) if text is not None else None
        if match is None or match.confidence < self.config.min_confidence:
            return None
        try:
            # Real paths, PATH lookups and commands.yaml: file system work, off the event loop.
            repo = await trio.to_thread.run_sync(resolve_repo, query.headers.get("x-daari-repo"), self.config)
            plan = await trio.to_thread.run_sync(plan_command, match, repo, self.config, self.base_env)
            return Prepared(match, plan)
        except Refused as exc:
            return declined({"tool_refused": {"rule_id": match.rule_id, "reason": str(exc)}})
        except Unavailable as exc:
            return declined({"tool_unavailable": {"rule_id": match.rule_id, "tool": exc.tool,
                                                   "reason": exc.reason}})


def declined(details: dict[str, Any]) -> ShortcutResult:
    return ShortcutResult("Lt", None, confidence=0.0, task_type="tool", details=details)


def tool_answer(tier: str, rule_id: str, text: str, tool: dict[str, Any], confidence: float,
            **extra: Any) -> ShortcutResult:
    return ShortcutResult(tier, Completion(text=text, model=TOOLS_MODEL), confidence=confidence, task_type="tool",
                          rule_id=rule_id, details={"tool": tool, **extra})
