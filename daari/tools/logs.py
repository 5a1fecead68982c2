"""Command logs in `<data_dir>/tools/logs`: bounded by count, total size and age, the oldest deleted first.

Blocking (a directory scan and unlinks): the ToolRunnerActor calls it on a worker thread at start and after
each command. A log still being written is never deleted, whatever the bounds say.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LogBounds:
    max_files: int
    max_total_bytes: int
    max_age_s: float


def prune_logs(logs_dir: Path, bounds: LogBounds, now: float, in_use: Collection[Path] = ()) -> list[Path]:
    """Delete `*.log` files past any bound, oldest (last written) first; returns those deleted."""
    logs: list[tuple[float, int, Path]] = []
    try:
        with os.scandir(logs_dir) as entries:
            for entry in entries:
                if entry.name.endswith(".log") and entry.is_file(follow_symlinks=False):
                    stat = entry.stat(follow_symlinks=False)
                    logs.append((stat.st_mtime, stat.st_size, Path(entry.path)))
    except FileNotFoundError:
        return []
    logs.sort(reverse=True)  # newest first: what is kept is counted from the newest
    # Logs in use stay whatever their age or size, and take their room first.
    kept_files = sum(1 for _, _, path in logs if path in in_use)
    kept_bytes = sum(size for _, size, path in logs if path in in_use)
    deleted = []
    for mtime, size, path in logs:
        if path in in_use:
            continue
        if (now - mtime > bounds.max_age_s or kept_files + 1 > bounds.max_files
                or kept_bytes + size > bounds.max_total_bytes):
            with contextlib.suppress(FileNotFoundError):  # another prune (or the user) got there first
                path.unlink()
                deleted.append(path)
            continue
        kept_files, kept_bytes = kept_files + 1, kept_bytes + size
    return deleted
