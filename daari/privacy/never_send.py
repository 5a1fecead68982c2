"""`privacy.never_send`: tool results that show a file the user keeps from remote models are replaced by a notice.

A tool result is recognised by the call it answers: when any string in that call's arguments (a path argument, or
a word of a shell command such as `cat .env`) matches a glob, the result is withheld. Matching is by fnmatch on the
whole string and on its last path component, so `.env*` matches `./app/.env.local` and `secrets/*` matches
`/home/me/repo/secrets/prod.json` only through a glob that says `*/secrets/*`."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import Any

from daari.jsonio import loads
from daari.protocol.chat import ChatRequest, Message

_WORD = re.compile(r"""[^\s'"`;|&<>()]+""")


def notice(path: str) -> str:
    return f"[daari: this tool result shows {path}, which privacy.never_send keeps on this machine]"


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def matching_path(arguments: str, globs: Sequence[str]) -> str | None:
    """The first path in a tool call's arguments (JSON text) that a glob matches, else None."""
    try:
        values = list(_strings(loads(arguments)))
    except ValueError:
        values = [arguments]
    for value in values:
        # A value with spaces is a command (or prose): its words are the paths; else the value is one path.
        for word in (_WORD.findall(value) if any(c.isspace() for c in value) else (value,)):
            word = word.rstrip(",:")
            name = word.rsplit("/", 1)[-1]
            for glob in globs:
                if fnmatch.fnmatchcase(word, glob) or ("/" not in glob and fnmatch.fnmatchcase(name, glob)):
                    return str(word)
    return None


def withheld_calls(messages: Sequence[Message], globs: Sequence[str]) -> dict[str, str]:
    """Tool call id -> the path that withholds its result."""
    if not globs:
        return {}
    out: dict[str, str] = {}
    for message in messages:
        for call in message.tool_calls:
            path = matching_path(call.arguments, globs)
            if path is not None:
                out[call.id] = path
    return out


def _raw_result(item: dict[str, Any], withheld: dict[str, str]) -> dict[str, Any] | None:
    """A tool result in a client body (Anthropic tool_result, OpenAI tool message, Responses output) withheld."""
    if item.get("type") == "tool_result" and item.get("tool_use_id") in withheld:
        return {**item, "content": notice(withheld[item["tool_use_id"]])}
    if item.get("role") == "tool" and item.get("tool_call_id") in withheld:
        return {**item, "content": notice(withheld[item["tool_call_id"]])}
    if item.get("type") == "function_call_output" and item.get("call_id") in withheld:
        return {**item, "output": notice(withheld[item["call_id"]])}
    return None


def _raw(value: Any, withheld: dict[str, str]) -> Any:
    if isinstance(value, list):
        items = [_raw(v, withheld) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        replaced = _raw_result(value, withheld)
        if replaced is not None:
            return replaced
        changed = {k: new for k, v in value.items() if (new := _raw(v, withheld)) is not v}
        return {**value, **changed} if changed else value
    return value


def withhold(request: ChatRequest, globs: Sequence[str]) -> tuple[ChatRequest, int]:
    """The request with the results of calls that read a never-send path replaced; how many were replaced."""
    withheld = withheld_calls(request.messages, globs)
    if not withheld:
        return request, 0
    count = 0
    messages: list[Message] = []
    for message in request.messages:
        if message.role == "tool" and message.tool_call_id in withheld:
            count += 1
            message = Message("tool", notice(withheld[message.tool_call_id]), [], message.tool_call_id,
                              message.name, message.is_error)
        messages.append(message)
    if not count:
        return request, 0
    raw = _raw(request.raw, withheld) if request.raw else request.raw
    return ChatRequest(messages, request.model, request.protocol, request.stream, request.temperature, request.tools,
                       request.sampling, request.include_usage, raw, request.passthrough_headers, request.extra,
                       request.query_string, request.shapes), count
