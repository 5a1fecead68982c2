"""The L1 lookup context: what two requests must share exactly before their embeddings are compared.

Model, temperature (absent is not 0), the tools schema hash, the sampling fingerprint, the fields the parser does
not interpret that can change the answer (`reasoning_effort`, `modalities`, `audio`, a field of a later API: L0's
key holds them too), the credential partition, the fold's exact part (system prompt, earlier turns, tool calls,
trailing tool results) and the part of the embedded turn the embedding model cut off. `stream` is not in it: a
stored answer serves both.
"""

from __future__ import annotations

import hashlib

from daari.jsonio import canonical
from daari.protocol.chat import ChatRequest
from daari.protocol.key_fields import tools_hash
from daari.semantic.fold import Fold

CONTEXT_VERSION = 1


def lookup_context(request: ChatRequest, folded: Fold, partition: str = "", unseen_tail: str = "") -> str:
    """Hex SHA-256 of everything L1 matches exactly; `unseen_tail` is the embed text past the model's window."""
    payload = {
        "v": CONTEXT_VERSION,
        "model": request.model,
        "temperature": request.temperature,
        "tools": tools_hash(request.tools) if request.tools else None,
        "sampling": request.sampling,
        "partition": partition,
        "agent": folded.agent_turn,
        "exact": folded.exact,
        "unseen": unseen_tail,
    }
    if request.extra:  # only when present: a request without such fields keeps the context it always had
        payload["extra"] = request.extra
    return hashlib.sha256(canonical(payload)).hexdigest()
