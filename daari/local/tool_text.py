"""Tool calls a local model wrote as text, found in its answer as it streams (the text may be split anywhere).

Formats recognised (docs/agents.md, "Local models that call tools"):
- Hermes / Qwen 2.5: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`;
- Qwen3-Coder: `<tool_call><function=NAME><parameter=KEY>value</parameter>...</function></tool_call>`, also without the
  outer tag; values are typed by the tool's JSON schema (a number stays a number);
- Mistral: `[TOOL_CALLS][{"name": ..., "arguments": ...}]`;
- a bare JSON object (or array of them) at the start of a line naming a defined tool: `{"name": ..., "arguments"}`,
  `"parameters"`, `"input"`, OpenAI's `{"type": "function", "function": {...}}`, `{"tool": ..., "tool_input"}`;
- the same inside a fenced block (```` ```json ````, ```` ```tool_call ```` or a bare fence).
Markup that says "tool call" (the tags, `[TOOL_CALLS]`) always becomes a call, even a broken one, so the answer
is judged as a call (and escalates when invalid); bare or fenced JSON becomes one only when it names a defined
tool, and is otherwise the text it was. Text around calls passes through unchanged; only text that could still
be the start of a call is held back (a `<tool_c` at the end of a piece, a line that starts with `{`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daari.protocol.chat import Tool

MAX_CAPTURE_CHARS = 1_000_000  # a call longer than this is not a call: given back as text
TAG_OPEN, TAG_CLOSE = "<tool_call>", "</tool_call>"
FN_OPEN, FN_CLOSE = "<function=", "</function>"
MISTRAL = "[TOOL_CALLS]"
FENCE = "```"
_MARKUP = (TAG_OPEN, FN_OPEN, MISTRAL)
_FENCE_INFOS = frozenset({"", "json", "json5", "tool_call", "tool_calls", "tool_code", "function", "functions"})
_PARAMETER = re.compile(r"<parameter=([^>\s]+)\s*>(.*?)</parameter>", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\s]+)\s*>(.*?)(?:</function>|$)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_ARGUMENT_KEYS = ("arguments", "parameters", "input", "args", "tool_input")


@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class CallPiece:
    name: str
    arguments: str  # JSON text (compact); the raw text when the call was unreadable
    raw: str


Piece = TextPiece | CallPiece


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class ToolTextParser:
    """Feed the answer's text as it arrives; take back text pieces and call pieces in order."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.schemas: dict[str, dict[str, Any]] = {t.name: t.parameters for t in tools}
        self._pending = ""
        self._line_start = True  # whether _pending[0] starts a line (indentation allowed)
        self._mode = "text"  # "text", "tag", "function", "mistral", "json", "fence"
        self.calls = 0

    def feed(self, text: str) -> list[Piece]:
        self._pending += text
        return self._drain(final=False)

    def close(self) -> list[Piece]:
        return self._drain(final=True)

    # ------------------------------------------------------------ the state machine

    def _drain(self, final: bool) -> list[Piece]:
        out: list[Piece] = []
        while self._pending:
            before = (self._mode, len(self._pending))
            if self._mode == "text":
                self._text(out, final)
            else:
                self._capture(out, final)
            if (self._mode, len(self._pending)) == before:
                break  # waiting for more text
        return _merged(out)

    def _text(self, out: list[Piece], final: bool) -> None:
        found = self._trigger(final)
        if found is None:
            keep = 0 if final else self._hold_back()
            self._emit_text(out, self._pending[:len(self._pending) - keep])
            return
        position, mode = found
        self._emit_text(out, self._pending[:position])
        if mode != "wait":  # "wait": a line start that cannot be judged yet stays pending
            self._mode = mode

    def _emit_text(self, out: list[Piece], text: str) -> None:
        if not text:
            return
        out.append(TextPiece(text))
        self._pending = self._pending[len(text):]
        self._line_start = _ends_line(text, self._line_start)

    def _trigger(self, final: bool) -> tuple[int, str] | None:
        """The first place a call may start, and its kind; None when there is none (yet)."""
        text = self._pending
        best: tuple[int, str] | None = None
        for marker, mode in ((TAG_OPEN, "tag"), (FN_OPEN, "function"), (MISTRAL, "mistral")):
            index = text.find(marker)
            if index >= 0 and (best is None or index < best[0]):
                best = (index, mode)
        for start in _line_starts(text, self._line_start):
            if best is not None and start >= best[0]:
                break
            line_mode = self._line_trigger(text, start, final)
            if line_mode is not None:
                return start, line_mode
        return best

    def _line_trigger(self, text: str, start: int, final: bool) -> str | None:
        """At a line start (after its indentation): "json", "fence", "wait" (too few characters to tell) or None."""
        rest = text[start:]
        if rest[:1] in ("{", "["):
            after = rest[1:].lstrip()
            if not after:
                return None if final else "wait"
            wanted = '"' if rest[0] == "{" else "{"
            return "json" if after[0] == wanted else None
        if FENCE.startswith(rest[:3]) and len(rest) < 3:
            return None if final else "wait"
        if rest.startswith(FENCE):
            newline = rest.find("\n")
            if newline < 0:
                return None if final else "wait"
            if rest[3:newline].strip().lower() not in _FENCE_INFOS:
                return None
            body = rest[newline + 1:].lstrip()
            if not body:
                return None if final else "wait"
            return "fence" if body[0] in "{[" else None
        return None

    def _hold_back(self) -> int:
        """How many characters at the end of the pending text could still begin a call."""
        text = self._pending
        keep = 0
        for marker in _MARKUP:
            for size in range(min(len(marker) - 1, len(text)), 0, -1):
                if text.endswith(marker[:size]):
                    keep = max(keep, size)
                    break
        last_line = text.rfind("\n") + 1
        if last_line == 0 and not self._line_start:
            return keep
        tail = text[last_line:]
        if tail.lstrip(" \t") in ("", "`", "``"):
            keep = max(keep, len(tail))
        return keep

    def _capture(self, out: list[Piece], final: bool) -> None:
        text = self._pending
        end = self._capture_end(text)
        if end is None and len(text) > MAX_CAPTURE_CHARS:
            self._mode = "text"
            self._emit_text(out, text)
            return
        if end is None and not final:
            return
        raw = text if end is None else text[:end]
        pieces = self._pieces(self._mode, raw, closed=end is not None)
        self._pending = text[len(raw):]
        self._mode = "text"
        if pieces is None:
            out.append(TextPiece(raw))
            self._line_start = _ends_line(raw, self._line_start)
            return
        out.extend(pieces)
        self.calls += sum(1 for p in pieces if isinstance(p, CallPiece))
        self._line_start = True

    def _capture_end(self, text: str) -> int | None:
        """Where the call that starts `text` ends (exclusive), or None while it is not complete."""
        mode = self._mode
        if mode == "tag":
            index = text.find(TAG_CLOSE)
            return None if index < 0 else index + len(TAG_CLOSE)
        if mode == "function":
            index = text.find(FN_CLOSE)
            return None if index < 0 else index + len(FN_CLOSE)
        if mode == "mistral":
            start = len(MISTRAL) + (len(text[len(MISTRAL):]) - len(text[len(MISTRAL):].lstrip()))
            if start >= len(text):
                return None
            end = _json_end(text, start)
            return end
        if mode == "json":
            start = len(text) - len(text.lstrip(" \t"))
            return _json_end(text, start)
        if mode == "fence":
            newline = text.find("\n")
            close = text.find("\n" + FENCE, newline)
            if close < 0:
                return None
            return close + 1 + len(FENCE)
        return None

    # ------------------------------------------------------------ reading a captured call

    def _pieces(self, mode: str, raw: str, closed: bool) -> list[Piece] | None:
        """The calls in `raw`; None: not a call after all (it stays text)."""
        if mode == "tag":
            inner = raw[len(TAG_OPEN):]
            inner = inner[:-len(TAG_CLOSE)] if closed else inner
            return self._markup_calls(inner, raw)
        if mode == "function":
            return self._markup_calls(raw, raw)
        if mode == "mistral":
            return self._markup_calls(raw[len(MISTRAL):], raw)
        if mode == "json":
            return self._json_calls(raw.strip(), raw) if closed else None
        if mode == "fence":
            body = raw[raw.find("\n") + 1:]
            body = body[:body.rfind(FENCE)] if closed else body
            return self._json_calls(body.strip(), raw)
        return None

    def _markup_calls(self, inner: str, raw: str) -> list[Piece]:
        functions = _FUNCTION.findall(inner)
        if functions:
            return [CallPiece(name, compact(self._xml_arguments(name, body)), raw) for name, body in functions]
        calls = _calls_from_text(inner.strip())
        if calls:
            return [CallPiece(name, compact(arguments), raw) for name, arguments in calls]
        name = _NAME.search(inner)
        return [CallPiece(name.group(1) if name else "", inner.strip(), raw)]  # unreadable: judged invalid

    def _json_calls(self, text: str, raw: str) -> list[Piece] | None:
        calls = _calls_from_text(text)
        if not calls or any(name not in self.schemas for name, _ in calls):
            return None
        return [CallPiece(name, compact(arguments), raw) for name, arguments in calls]

    def _xml_arguments(self, name: str, body: str) -> dict[str, Any]:
        properties = (self.schemas.get(name) or {}).get("properties")
        properties = properties if isinstance(properties, dict) else {}
        arguments: dict[str, Any] = {}
        for key, value in _PARAMETER.findall(body):
            arguments[key] = _typed(_trim_newlines(value), properties.get(key))
        return arguments


def _merged(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, TextPiece) and out and isinstance(out[-1], TextPiece):
            out[-1] = TextPiece(out[-1].text + piece.text)
        else:
            out.append(piece)
    return out


def _ends_line(text: str, was_line_start: bool) -> bool:
    """Whether what follows `text` starts a line (it ended with a newline, or was indentation at a line start)."""
    tail = text[text.rfind("\n") + 1:]
    if "\n" in text:
        return tail.strip(" \t") == ""
    return was_line_start and tail.strip(" \t") == ""


def _line_starts(text: str, first_is_start: bool) -> list[int]:
    """Positions right after each line's indentation."""
    starts: list[int] = []
    index = 0 if first_is_start else text.find("\n") + 1 if "\n" in text else -1
    while 0 <= index <= len(text):
        position = index
        while position < len(text) and text[position] in " \t":
            position += 1
        if position < len(text):
            starts.append(position)
        newline = text.find("\n", index)
        index = newline + 1 if newline >= 0 else -1
    return starts


def _json_end(text: str, start: int) -> int | None:
    """The end of the JSON value that opens at `start` (strings and escapes respected), or None."""
    depth = 0
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _calls_from_text(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Calls in JSON text: one object, an array, or several objects one after another."""
    try:
        return _calls_from_value(json.loads(text))
    except ValueError:
        pass
    calls: list[tuple[str, dict[str, Any]]] = []
    decoder = json.JSONDecoder()
    index = 0
    while index < len(text):
        while index < len(text) and text[index] in " \t\r\n,":
            index += 1
        if index >= len(text):
            break
        try:
            value, index = decoder.raw_decode(text, index)
        except ValueError:
            return []
        found = _calls_from_value(value)
        if not found:
            return []
        calls.extend(found)
    return calls


def _calls_from_value(value: Any) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(value, list):
        calls = [call for item in value for call in _calls_from_value(item)]
        return calls if value and len(calls) == len(value) else []
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("tool_calls"), list):
        return _calls_from_value(value["tool_calls"])
    function = value.get("function")
    if isinstance(function, dict):
        value = function
    name = value.get("name") if isinstance(value.get("name"), str) else value.get("tool")
    if not isinstance(name, str) or not name:
        return []
    arguments: Any = {}
    for key in _ARGUMENT_KEYS:
        if key in value:
            arguments = value[key]
            break
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return []
    if not isinstance(arguments, dict):
        return []
    extra = set(value) - {"name", "tool", "type", "id", *_ARGUMENT_KEYS}
    if extra:
        return []  # an object with other fields is data that happens to have a "name", not a call
    return [(name, arguments)]


def _trim_newlines(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def _typed(value: str, schema: Mapping[str, Any] | None) -> Any:
    """A Qwen3-Coder parameter value as its schema's type; text stays text."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if kind == "string" or (kind is None and schema is not None):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    if kind is None:
        return parsed
    if kind in ("integer", "number") and isinstance(parsed, int | float) and not isinstance(parsed, bool):
        return parsed
    if kind == "boolean" and isinstance(parsed, bool):
        return parsed
    if kind == "array" and isinstance(parsed, list):
        return parsed
    if kind == "object" and isinstance(parsed, dict):
        return parsed
    if isinstance(kind, list):
        return parsed
    return value
