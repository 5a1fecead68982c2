"""Read one string from a GGUF file's metadata (the chat template) without loading tensors or vocabularies.

The GGUF header is a list of typed key/value pairs; the vocabulary arrays in it are skipped by length, so
reading the template of a 150,000-token model costs one pass over the header and no tensor data.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value types
_STRING, _ARRAY = 8, 9


class GGUFFormatError(ValueError):
    pass


def _u32(f: BinaryIO) -> int:
    return int(struct.unpack("<I", f.read(4))[0])


def _u64(f: BinaryIO) -> int:
    return int(struct.unpack("<Q", f.read(8))[0])


def _string(f: BinaryIO) -> bytes:
    return f.read(_u64(f))


def _skip(f: BinaryIO, kind: int) -> None:
    if kind == _STRING:
        f.seek(_u64(f), 1)
    elif kind == _ARRAY:
        item, count = _u32(f), _u64(f)
        if item == _STRING:
            for _ in range(count):
                f.seek(_u64(f), 1)
        elif item in _SCALAR_SIZES:
            f.seek(_SCALAR_SIZES[item] * count, 1)
        else:
            for _ in range(count):
                _skip(f, item)
    elif kind in _SCALAR_SIZES:
        f.seek(_SCALAR_SIZES[kind], 1)
    else:
        raise GGUFFormatError(f"unknown GGUF value type {kind}")


def metadata_string(path: Path, key: str) -> str | None:
    """The string value of `key` in the GGUF file's metadata, or None when the file has no such key."""
    wanted = key.encode()
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise GGUFFormatError(f"{path} is not a GGUF file")
        version = _u32(f)
        if version < 2:
            raise GGUFFormatError(f"{path}: GGUF version {version} is too old")
        _u64(f)  # tensor count
        for _ in range(_u64(f)):
            name, kind = _string(f), _u32(f)
            if name == wanted and kind == _STRING:
                return _string(f).decode("utf-8", "replace")
            _skip(f, kind)
    return None
