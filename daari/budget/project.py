"""Which project a request belongs to: the git root of the directory `X-Daari-Repo` names, else of the working
directory the client states in its prompt (Claude Code's `Working directory: /path` in its system prompt, Codex's
`<cwd>/path</cwd>` environment context); the directory itself when it is in no repository. `project_of` is blocking
(it looks at the file system) and remembered per directory; `stated_directory` is pure."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from daari.protocol.chat import ChatRequest

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


_STATED = re.compile(r"(?m)^[ \t]*(?:Primary )?[Ww]orking directory:[ \t]*(/[^\n]*?)[ \t]*$|<cwd>(/[^<\n]+)</cwd>")
SCAN_CHARS = 65536  # of each message: the statement sits in the first lines of a system prompt or context message
SCAN_MESSAGES = 4


def stated_directory(request: ChatRequest) -> str | None:
    """The working directory the client wrote into its first messages (system, developer, environment context)."""
    for message in request.messages[:SCAN_MESSAGES]:
        if message.role not in ("system", "user"):
            continue
        text = message.text()[:SCAN_CHARS]
        if "orking directory:" not in text and "<cwd>" not in text:
            continue  # a substring test first: the regex only runs where a statement may be
        match = _STATED.search(text)
        if match is not None:
            return (match.group(1) or match.group(2)).strip()
    return None
