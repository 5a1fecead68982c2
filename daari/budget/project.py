"""Which project a request belongs to: the git root of the directory `X-Daari-Repo` names (the directory itself
when it is in no repository). Blocking (it looks at the file system); remembered per directory."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

NO_PROJECT = ""


@lru_cache(maxsize=1024)
def git_root(directory: str) -> str:
    path = Path(directory)
    if not path.is_absolute():
        return NO_PROJECT
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return str(path)


def project_of(header: str | None) -> str:
    if not header or len(header) > 4096 or "\x00" in header:
        return NO_PROJECT
    try:
        return git_root(header.strip())
    except OSError:
        return NO_PROJECT
