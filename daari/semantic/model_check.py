"""verify: model — asking a local model whether two prompts ask for the same thing, and parsing its answer.

The answer is parsed strictly: exactly "YES" or "NO" (any case, an optional final period). Anything else
is malformed and rejects the candidate: an unsure verifier must not serve a stored answer.
"""

from __future__ import annotations

import re

from daari.protocol.chat import Message
from daari.semantic.lexical import Verdict

_ANSWER = re.compile(r"^\s*(yes|no)\.?\s*$", re.IGNORECASE)

INSTRUCTION = (
    "You compare two requests a developer sent to a coding assistant. Answer YES if one answer serves "
    "both requests exactly (they ask for the same thing), NO if anything that changes the answer differs "
    "(a number, a name, a version, negation, direction, language, tool). Reply with one word: YES or NO."
)


def verifier_messages(a: str, b: str) -> list[Message]:
    """The side question for the local model; the prompts go in as data, after the instruction."""
    return [
        Message("system", INSTRUCTION),
        Message("user", f"Request A:\n{a}\n\nRequest B:\n{b}\n\nDo A and B ask for the same thing? YES or NO."),
    ]


def parse_model_verdict(reply: str | None) -> Verdict:
    """YES serves, NO rejects, anything else (or no reply) rejects as malformed."""
    if reply is None:
        return Verdict(False, "model_unavailable", "the verifying model gave no answer")
    match = _ANSWER.match(reply)
    if match is None:
        return Verdict(False, "model_malformed", "the verifying model did not answer YES or NO")
    if match.group(1).lower() == "yes":
        return Verdict(True, None, "model: YES")
    return Verdict(False, "model", "the verifying model answered NO")


def judge_blocking(a: str, b: str) -> Verdict:
    """For the offline eval: the embedded L3 model answers greedily, in this thread."""
    from daari.executors.embedded_model import EMBEDDED, GenerationSettings, generate_blocking

    loaded = EMBEDDED.load()
    messages = [{"role": m.role, "content": m.text()} for m in verifier_messages(a, b)]
    pieces: list[str] = []
    generate_blocking(loaded, loaded.render_chat(messages), GenerationSettings(max_new_tokens=4),
                      lambda text, _lp, _n: pieces.append(text), lambda: None)
    return parse_model_verdict("".join(pieces))
