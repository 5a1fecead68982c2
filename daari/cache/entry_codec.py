"""L0 and L1 entries as the bytes a Redis value holds (JSON, versioned), and vectors as float32 bytes. Pure."""

from __future__ import annotations

from typing import Any

import numpy as np

from daari import jsonio
from daari.cache.l0_store import L0Entry
from daari.protocol.chat import Completion
from daari.semantic.index import Vector
from daari.semantic.minilm import DIMENSIONS

VERSION = 1


class BadEntry(ValueError):
    """A stored value daari cannot read (another version, or not daari's): treated as a miss."""


def l0_to_bytes(entry: L0Entry) -> bytes:
    return jsonio.dumps({
        "v": VERSION, "completion": entry.completion.to_json(), "tier": entry.tier, "agent_turn": entry.agent_turn,
        "semantic_ok": entry.semantic_ok, "confidence": entry.confidence, "created_at": entry.created_at,
        "task_type": entry.task_type, "rule_id": entry.rule_id, "ceiling": entry.ceiling})


def l0_from_bytes(data: bytes) -> L0Entry:
    try:
        value: dict[str, Any] = jsonio.loads(data)
        if not isinstance(value, dict) or value.get("v") != VERSION:
            raise BadEntry("not a daari L0 entry of this version")
        return L0Entry(
            completion=Completion.from_json(value["completion"]), tier=str(value["tier"]),
            agent_turn=bool(value["agent_turn"]), semantic_ok=bool(value["semantic_ok"]),
            confidence=value["confidence"], created_at=float(value["created_at"]), task_type=value["task_type"],
            rule_id=value["rule_id"], ceiling=value["ceiling"], size=len(data))
    except (KeyError, TypeError, ValueError) as exc:
        raise BadEntry(f"unreadable L0 entry ({type(exc).__name__})") from None


def vector_to_bytes(vector: Vector) -> bytes:
    return np.asarray(vector, np.float32).tobytes()


def vector_from_bytes(data: bytes) -> Vector:
    if len(data) != DIMENSIONS * 4:
        raise BadEntry(f"a vector of {len(data)} bytes, expected {DIMENSIONS * 4}")
    return np.frombuffer(data, np.float32).copy()
