"""Everything the judge holds against an answer besides the gates: the stated format it breaks, a short-form
answer cut by max_tokens, runaway repetition, a short answer that copies the prompt, an answer that asks the
question back (docs/routing.md).

`answer_violations` is the one call the pipeline's judge and `daari eval judge` make.
"""

from __future__ import annotations

from daari import task_types
from daari.protocol.chat import ChatRequest, Completion
from daari.routing.classifier import last_user_text
from daari.routing.client_shapes import is_probe
from daari.trust.asked_back import asks_back
from daari.trust.closing_question import closing_question
from daari.trust.degenerate import LazyPrompt, mostly_echo, runaway_repetition
from daari.trust.format_check import format_violations
from daari.trust.stated_format import StatedFormat, read_stated_format

SIDE_CALL_RULE = "R-C1"
ECHO_CHECK_MAX_WORDS = 200  # a short-form answer longer than this breaks its bounds anyway
ECHO_SOURCE_MAX_CHARS = 200_000


def short_form(fmt: StatedFormat, task_type: str | None, rule_id: str | None) -> bool:
    """The answer is meant to be short: its prompt says so, or it is a yes/no classification or a side call."""
    return fmt.short_form or task_type == task_types.CLASSIFY or rule_id == SIDE_CALL_RULE


def prompt_material(request: ChatRequest) -> str:
    """What an answer may copy from: the last user message first (what is copied most), then the rest."""
    rest = "\n".join(m.text() for m in request.messages if m.role in ("user", "system"))
    return (last_user_text(request) + "\n" + rest)[:ECHO_SOURCE_MAX_CHARS]


def answer_violations(request: ChatRequest, completion: Completion, task_type: str | None = None,
                      rule_id: str | None = None, fmt: StatedFormat | None = None) -> tuple[str, ...]:
    """What is wrong with the answer (names, fixed order), or () when nothing is. Empty answers are the gates'."""
    text = completion.text
    if not text.strip() or is_probe(request):
        return ()
    stated = read_stated_format(request) if fmt is None else fmt
    question = closing_question(request) if stated.keeps_question else None
    last_user = last_user_text(request)
    found = list(format_violations(text, stated, last_user, question))
    short = short_form(stated, task_type, rule_id)
    if completion.finish_reason == "length" and short:
        found.append("truncated")
    material = LazyPrompt(lambda: prompt_material(request))  # joined only if a check reads it
    if runaway_repetition(text, material):
        found.append("repetition")
    if short and len(text.split()) <= ECHO_CHECK_MAX_WORDS and mostly_echo(text, material.text):
        found.append("copies_prompt")
    if not short and asks_back(text, last_user):  # a short form's copying is `copies_prompt`'s
        found.append("asks_back")
    return tuple(found)
