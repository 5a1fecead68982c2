"""JSON on the hot path: orjson (several times faster than the stdlib for daari's bodies), with the stdlib
as the fallback for what orjson refuses (integers beyond 64 bits, NaN), but never for a value nested deeper than
orjson's limit (1024 levels): the stdlib would recurse into a RecursionError.

`dumps` is compact UTF-8; `canonical` also sorts keys, for hashing (cache keys).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

MAX_DEPTH = 1024  # orjson's nesting limit (arrays and objects): deeper is refused, not parsed another way
ENCODE_DEPTH = 254  # orjson encodes at most this many levels; the stdlib fallback goes on to about 900


def loads(data: bytes | str) -> Any:
    """Parse JSON; what orjson refuses but the stdlib takes (NaN, integers beyond 64 bits) still parses.
    Invalid JSON, and JSON nested deeper than MAX_DEPTH, raise ValueError."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("depth limit"):
            raise ValueError(f"JSON nested more than {MAX_DEPTH} levels deep") from None
    try:
        return json.loads(data)
    except RecursionError:  # the stdlib recurses per level: a value orjson refused for another reason
        raise ValueError("JSON nested too deep to parse") from None


def within_encode_depth(value: Any) -> bool:
    """Whether orjson can encode `value`: arrays and objects nested at most ENCODE_DEPTH levels deep (a value
    only the stdlib encodes, an integer beyond 64 bits, counts as within)."""
    try:
        orjson.dumps(value)
    except TypeError as exc:
        return str(exc) != "Recursion limit reached"
    return True


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def canonical(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
