"""What the caches must not keep: an answer holding a secret (a local tier echoing a key it was sent, a remote
answer restored), or one whose prompt does (L1 stores the last user message's text to match paraphrases)."""

from __future__ import annotations

from daari.privacy.detect import find_secrets
from daari.protocol.chat import ChatRequest, Completion
from daari.routing.classifier import last_user_text


def holds_secret(request: ChatRequest, completion: Completion) -> bool:
    texts = [completion.text, *(call.arguments for call in completion.tool_calls), last_user_text(request)]
    return any(find_secrets(text) for text in texts if text)
