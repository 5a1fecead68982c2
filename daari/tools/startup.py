"""Starting the tool tiers: the CCS and Lt shortcut tiers on the ToolRunnerActor, the hybrid classifier's Lt probe.

The ToolRunnerActor itself is a row of actors/table.py (only with tools.enabled).
"""

from __future__ import annotations

from functools import partial

import trio

from actors.runtime import Address
from daari.pipeline.runtime import Runtime
from daari.routing.lt_probe import LtMatcher, register_lt_matcher, unregister_lt_matcher
from daari.tools.patterns import is_lt_command
from daari.tools.tiers import CcsTier, ToolService, ToolTier


async def start_tools(nursery: trio.Nursery, rt: Runtime, runner: Address) -> None:
    """Only called with tools.enabled: nothing that can run a command exists otherwise."""
    config = rt.config
    service = ToolService(config.tools, runner)
    rt.shortcuts["CCS"], rt.shortcuts["Lt"] = CcsTier(service), ToolTier(service)
    await nursery.start(_lt_probe, partial(is_lt_command, min_confidence=config.tools.min_confidence))


async def _lt_probe(matcher: LtMatcher, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """The classifier asks "does an Lt pattern match?" while this server runs (the registry is process-wide)."""
    register_lt_matcher(matcher)
    try:
        task_status.started()
        await trio.sleep_forever()
    finally:
        unregister_lt_matcher(matcher)
