"""Hosted tools (web_search, file_search, code_interpreter, image_generation, remote MCP) are an offer to the
model, not a requirement: a tier that cannot run them answers without them (`hosted_tools: drop`, the
default) or is left out (`refuse`). What was dropped is said in `daari_meta.dropped_tools`, the
`x-daari-dropped-tools` response header, and one log line per session and tier.

Only a Responses upstream (executor kind `openai_responses`) runs hosted tools: it gets the client's body as
sent. Hosted tool calls already in the history are read by other tiers as notes (`responses_wire.hosted_note`)
or, under `refuse`, left to a Responses tier.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping

from daari.protocol.chat import ChatRequest
from daari.protocol.responses_wire import hosted_tools

log = logging.getLogger("daari.pipeline")

HOSTED_KINDS = frozenset({"openai_responses"})  # executor kinds that run hosted tools themselves
SESSION_HEADERS = ("session_id", "session-id", "x-session-id", "conversation_id", "thread-id",
                   "x-claude-code-session-id")


def uses_hosted(request: ChatRequest) -> bool:
    """Hosted tools offered, or hosted tool calls in the history."""
    return bool(hosted_tools(request)) or bool(request.protocol == "responses" and request.shapes.tool_items)


def tier_takes(request: ChatRequest, kind: str | None, policy: str) -> bool:
    """Whether a tier of executor `kind` with `hosted_tools: policy` may answer `request`."""
    return kind in HOSTED_KINDS or policy != "refuse" or not uses_hosted(request)


def dropped_tools(request: ChatRequest, kind: str | None) -> list[str] | None:
    """The hosted tools a tier of executor `kind` answers without (None: nothing dropped; an L0 hit, kind
    None, replays an answer whose drop was said when it was made)."""
    if kind is None or kind in HOSTED_KINDS:
        return None
    return hosted_tools(request) or None


def session_of(request: ChatRequest) -> str:
    """The client's session, for logging once per session: a session header, else the prompt cache key."""
    for name in SESSION_HEADERS:
        if request.passthrough_headers.get(name):
            return request.passthrough_headers[name]
    key = request.raw.get("prompt_cache_key")
    return key if isinstance(key, str) else ""


class DropLog:
    """Logs dropped hosted tools once per (session, tier, tools); remembers the newest `size` sessions."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._seen: OrderedDict[tuple[str, str, tuple[str, ...]], None] = OrderedDict()

    def note(self, request: ChatRequest, tier: str, dropped: list[str]) -> bool:
        """Log the drop unless this session already saw it on this tier; True when a line was written."""
        key = (session_of(request), tier, tuple(dropped))
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        while len(self._seen) > self.size:
            self._seen.popitem(last=False)
        log.info("tier %s cannot run the hosted tools %s: answering without them (hosted_tools: drop)%s",
                 tier, ", ".join(dropped), f" [session {key[0]}]" if key[0] else "")
        return True


def settle_dropped(request: ChatRequest, tier: str, kind: str | None, drop_log: DropLog) -> list[str] | None:
    """What the answering tier drops, logged once per session (`drop_log`: one per server): for
    `Meta.dropped_tools`."""
    dropped = dropped_tools(request, kind)
    if dropped:
        drop_log.note(request, tier, dropped)
    return dropped


def policies(tiers: Mapping[str, object]) -> dict[str, str]:
    """Each configured tier's `hosted_tools` policy."""
    return {name: str(getattr(tier, "hosted_tools", "drop")) for name, tier in tiers.items()}
