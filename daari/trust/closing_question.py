"""The question a conversation ends on, and whether an answer kept it: for prompts that say "if the conversation
ends with an unanswered question to the user, preserve that exact question" (opencode's summaries)."""

from __future__ import annotations

import re

from daari.protocol.chat import ChatRequest

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")  # "cli.py?" is one sentence: a break needs space after
MIN_KEPT_SHARE = 0.8  # "exact", read with room for a changed pronoun or dropped article; a paraphrase fails


def closing_question(request: ChatRequest) -> str | None:
    """The last sentence of the conversation's last assistant message when it is a question and nothing answered
    it: only the instruction asking for the summary (one user message, or none) follows it."""
    messages = request.messages
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None)
    if last is None or sum(1 for m in messages[last + 1:] if m.role == "user") > 1:
        return None
    text = messages[last].text().rstrip()
    if not text.endswith("?"):
        return None
    return sentences(text)[-1]


def sentences(text: str) -> list[str]:
    """The text's sentences, stripped: a break is a sentence's end mark followed by space, or a new line."""
    return [s.strip() for s in _SENTENCE_BREAK.split(text) if s.strip()]


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def question_kept(answer: str, question: str) -> bool:
    """The answer asks the question: it has a question mark and at least 80% of the question's words."""
    wanted = words(question)
    if not wanted:
        return True
    have = set(words(answer))
    return "?" in answer and sum(1 for w in wanted if w in have) / len(wanted) >= MIN_KEPT_SHARE
