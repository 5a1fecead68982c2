"""A lenient literal parser: JSON, JavaScript object literals and Python literals -> a JSON value.

Accepts unquoted keys, single-quoted strings, trailing commas, comments, True/False/None and tuples.
Bounded: the caller caps the input size, and nesting deeper than MAX_DEPTH is refused.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64

_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/|\#[^\n]*)
  | (?P<punct>[{}\[\](),:])
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
""", re.VERBOSE | re.DOTALL)

_CONSTANTS: dict[str, Any] = {"true": True, "false": False, "null": None, "True": True, "False": False,
                              "None": None}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", "'": "'", '"': '"',
            "0": "\0"}


class NotALiteral(ValueError):
    """The text is not a literal this parser accepts."""


def parse_lenient(text: str) -> Any:
    """Parse `text` as one literal value; raise NotALiteral otherwise."""
    tokens = _tokenize(text)
    if not tokens:
        raise NotALiteral("empty")
    value, pos = _value(tokens, 0, 0)
    if pos != len(tokens):
        raise NotALiteral(f"unexpected {tokens[pos][1]!r} after the value")
    return value


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise NotALiteral(f"unexpected character {text[pos]!r}")
        kind = match.lastgroup
        assert kind is not None
        if kind != "ws":
            tokens.append((kind, match.group()))
        pos = match.end()
    return tokens


def _value(tokens: list[tuple[str, str]], pos: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_DEPTH:
        raise NotALiteral("nested too deeply")
    if pos >= len(tokens):
        raise NotALiteral("unexpected end")
    kind, text = tokens[pos]
    if kind == "punct" and text == "{":
        return _object(tokens, pos + 1, depth + 1)
    if kind == "punct" and text in "[(":
        return _array(tokens, pos + 1, depth + 1, "]" if text == "[" else ")")
    if kind == "string":
        return _string(text), pos + 1
    if kind == "number":
        return _number(text), pos + 1
    if kind == "ident" and text in _CONSTANTS:
        return _CONSTANTS[text], pos + 1
    raise NotALiteral(f"unexpected {text!r}")


def _object(tokens: list[tuple[str, str]], pos: int, depth: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    while True:
        if pos >= len(tokens):
            raise NotALiteral("unterminated object")
        kind, text = tokens[pos]
        if kind == "punct" and text == "}":
            return result, pos + 1
        if kind == "string":
            key = _string(text)
        elif kind in ("ident", "number"):
            key = text
        else:
            raise NotALiteral(f"unexpected {text!r} where a key belongs")
        if pos + 1 >= len(tokens) or tokens[pos + 1] != ("punct", ":"):
            raise NotALiteral("a key without ':'")
        result[key], pos = _value(tokens, pos + 2, depth)
        pos = _separator(tokens, pos, "}")


def _array(tokens: list[tuple[str, str]], pos: int, depth: int, close: str) -> tuple[list[Any], int]:
    result: list[Any] = []
    while True:
        if pos >= len(tokens):
            raise NotALiteral("unterminated list")
        if tokens[pos] == ("punct", close):
            return result, pos + 1
        item, pos = _value(tokens, pos, depth)
        result.append(item)
        pos = _separator(tokens, pos, close)


def _separator(tokens: list[tuple[str, str]], pos: int, close: str) -> int:
    """After an item: a comma (a trailing one is fine) or the closing bracket, which is left for the caller."""
    if pos < len(tokens) and tokens[pos] == ("punct", ","):
        return pos + 1
    if pos < len(tokens) and tokens[pos] == ("punct", close):
        return pos
    raise NotALiteral(f"expected ',' or {close!r}")


def _string(token: str) -> str:
    if token[0] == '"':
        try:
            return str(json.loads(token))
        except ValueError:
            pass  # JavaScript escapes JSON does not know ("\'"): decoded below
    body = token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 2:i + 6]):
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _number(token: str) -> int | float:
    text = token.lstrip("+")
    if text.lower().lstrip("-").startswith("0x"):
        return int(text, 16)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise NotALiteral("not a finite number")
    return value
