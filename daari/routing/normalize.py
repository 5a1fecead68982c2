"""Normalization: fold only the differences that cannot change what a request means.

Folded in message text (system, user, assistant): CRLF/CR line ends become LF; trailing spaces and tabs
at line ends go; leading and trailing blank space of the whole text goes; runs of two or more blank lines
become one blank line; and, outside fenced code blocks (```), runs of spaces/tabs inside a line become
one space (leading indentation is kept). Inside a code fence only line ends and trailing spaces fold,
because there interior spacing can be meaning (string literals, alignment-sensitive formats).
Not folded: letter case, punctuation, tool results (a tool's output is data: any change is a change),
image data. Tool-call arguments are re-encoded as canonical JSON (sorted keys, compact) when they parse.
"""

from __future__ import annotations

import json
import re

from daari.protocol.chat import ContentPart, Message, ToolCall

_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n{3,}")
_INNER_RUNS = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def normalize_text(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING.sub("", text)
    if "  " in text or "\t" in text:
        text = _fold_inner_runs(text)
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip()


def _fold_inner_runs(text: str) -> str:
    lines = text.split("\n")
    in_fence = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            lines[i] = _INNER_RUNS.sub(" ", line)
    return "\n".join(lines)


def canonical_arguments(arguments: str) -> str:
    """Tool-call arguments as canonical JSON; left as they are when they are not JSON."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError):
        return arguments


def _normalize_parts(parts: list[ContentPart]) -> list[ContentPart]:
    return [{**p, "text": normalize_text(p["text"])} if p.get("type") == "text" else p for p in parts]


def normalize_message(message: Message) -> Message:
    if message.role == "tool":
        content = message.content
    elif isinstance(message.content, str):
        content = normalize_text(message.content)
    elif isinstance(message.content, list):
        content = _normalize_parts(message.content)
    else:
        content = None
    return Message(
        role=message.role,
        content=content,
        tool_calls=[ToolCall(c.id, c.name, canonical_arguments(c.arguments)) for c in message.tool_calls],
        tool_call_id=message.tool_call_id,
        name=message.name,
        is_error=message.is_error,
    )
