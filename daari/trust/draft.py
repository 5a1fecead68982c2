"""Draft injection (`cache.l1.draft_injection`): an L1 candidate that passed the similarity threshold but failed
verification is shown to the model as a draft, in a system message of this documented format, so a near-miss
might still save generated tokens. Off by default: measured, it does not win (docs/caching.md)."""

from __future__ import annotations

from dataclasses import replace

from daari.protocol.chat import ChatRequest, Message

DRAFT_INSTRUCTION = (
    "Below, between <draft> tags, is an earlier answer to a similar but not identical question. If it also "
    "answers this question, reuse it; where it does not, correct it or answer from scratch. Do not mention the "
    "draft.")


def draft_message(draft: str) -> Message:
    return Message("system", f"{DRAFT_INSTRUCTION}\n<draft>\n{draft}\n</draft>")


def with_draft(request: ChatRequest, draft: str) -> ChatRequest:
    """The request as the model sees it with a draft: the draft's system message after the request's own system
    messages (a copy: the request itself, its key and its classification are unchanged)."""
    messages = list(request.messages)
    at = 0
    while at < len(messages) and messages[at].role == "system":
        at += 1
    messages.insert(at, draft_message(draft))
    return replace(request, messages=messages, raw={})  # the native body would not carry the draft
