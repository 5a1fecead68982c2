"""What the decision log keeps of a prompt (`log.prompts`): nothing, a keyed hash, or the text.

The hash is a keyed BLAKE2b under the data dir's secret (as strong as an HMAC, and a third of its cost on
every request): it tells repeats apart in the tail and the log, and a short prompt cannot be recovered by
hashing guesses without the secret. The text, when kept, has its secrets replaced (docs/privacy.md).
"""

from __future__ import annotations

import hashlib
from typing import Literal

from daari.privacy.redact import scrub
from daari.protocol.chat import ChatRequest
from daari.routing.classifier import last_user_text

PromptPolicy = Literal["none", "hash", "full"]


def prompt_fields(policy: PromptPolicy, secret: bytes | None, request: ChatRequest) -> tuple[str | None, str | None]:
    """(prompt_hash, prompt) for a request's last user message under `policy`."""
    if policy == "none":
        return None, None
    text = last_user_text(request)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=(secret or b"daari")[:64],
                             digest_size=8).hexdigest()
    # Secrets never reach the log, whatever privacy.redact says: the full text keeps placeholders in their place.
    return digest, (scrub(text, secret or b"daari") if policy == "full" else None)
