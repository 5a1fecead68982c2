"""What the decision log keeps of a prompt (`log.prompts`): nothing, a keyed hash, or the text.

The hash is an HMAC under the data dir's secret: it tells repeats apart in the tail and the log, and a
short prompt cannot be recovered by hashing guesses without the secret.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Literal

from daari.protocol.chat import ChatRequest
from daari.routing.classifier import last_user_text

PromptPolicy = Literal["none", "hash", "full"]


def prompt_fields(policy: PromptPolicy, secret: bytes | None, request: ChatRequest) -> tuple[str | None, str | None]:
    """(prompt_hash, prompt) for a request's last user message under `policy`."""
    if policy == "none":
        return None, None
    text = last_user_text(request)
    digest = hmac.new(secret or b"daari", text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:16]
    return digest, (text if policy == "full" else None)
