"""How many tasks run on daari's event loop: a gauge on /metrics (`daari_event_loop_tasks`), so a leak of tasks
(a stream or a connection that never ends) shows in a long run (bench/soak.py compares it to its baseline)."""

from __future__ import annotations

import trio
import trio.lowlevel


def loop_task_count() -> int:
    """Every task under the root task, the caller included (call from the loop)."""
    root = trio.lowlevel.current_root_task()
    if root is None:
        return 0
    count, pending = 0, [root]
    while pending:
        task = pending.pop()
        count += 1
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return count
