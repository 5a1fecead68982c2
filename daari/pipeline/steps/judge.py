"""Routing spec step 11, judging an attempt's answer: how confident, and whether that is enough.

Reads: the request, the tier and its answer. Decides: a `Judgement` (score, method, passed, and a gate that
keeps an answer out of the cache); the execute step escalates on a failed one.

Scores are on one 0-1 scale so attempts can be compared: heuristic and logprob confidence are 0-1 already,
a 1-5 self-evaluation is divided by 5. Which method applies: tool calls are judged by their validity;
L6 is trusted; otherwise the gates (empty, too short, refusal, acknowledgement, echo: 0 and never cached),
then the answer checks (`daari/trust/answer_check.py`: a broken stated format, truncation of a short-form
answer, repetition, a copied prompt: 0, failed at every local tier, never cached), then logprobs when the
executor gave them, else (L4/L5) a self-evaluation asked of the same tier.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from daari import task_types
from daari.budget.payer import Payer
from daari.config import ConfidenceConfig
from daari.local.tool_schema import call_problem
from daari.pipeline.side_query import SideQuestions
from daari.protocol.chat import ChatRequest, Completion
from daari.routing.classifier import last_user_text
from daari.routing.client_shapes import PROBE_MAX_TOKENS
from daari.routing.confidence import (
    MIN_ANSWER_CHARS,
    answer_gate,
    logprob_confidence,
    parse_self_eval,
    passing_score,
    self_eval_messages,
)
from daari.trust.answer_check import answer_violations
from daari.trust.stated_format import StatedFormat, read_stated_format


@dataclass(frozen=True)
class Judgement:
    score: float  # 0-1
    method: str  # "tool_calls", "frontier", "heuristic", "logprob", "self_eval"
    passed: bool
    gate: str | None = None  # why the answer is no answer ("empty", "acknowledgement", "echo", ...)
    violations: tuple[str, ...] = ()  # what the answer breaks ("word_count", "prefix", "truncated", ...)

    @property
    def cacheable(self) -> bool:
        """A gated answer, or one that breaks what its prompt stated, is never stored, even when no other tier
        could be asked."""
        return self.gate is None and not self.violations

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the answer was held back, for daari_meta's attempts: the gate, then the violations."""
        return ((self.gate,) if self.gate else ()) + self.violations


NEVER_CACHED_AT_L6 = ("empty", "acknowledgement", "echo")


def min_answer_chars(request: ChatRequest, task_type: str | None, stated: StatedFormat | None = None) -> int:
    """The spec's "> 10 characters", except where a right answer is shorter: a yes/no classification, and a
    probe whose max_tokens cannot reach 10 characters (0: no floor); and an answer whose prompt states a short
    form ("Greeting" is a right opencode title): 1, so the stated format judges its length and an answer that
    only acknowledges is still caught."""
    max_tokens = request.max_tokens
    if task_type == task_types.CLASSIFY or (max_tokens is not None and max_tokens <= PROBE_MAX_TOKENS):
        return 0
    return 1 if stated is not None and stated.short_form else MIN_ANSWER_CHARS


def gate(request: ChatRequest, completion: Completion, task_type: str | None,
         stated: StatedFormat | None = None) -> str | None:
    last_user = last_user_text(request)
    history = [m.text() for m in request.messages if m.role in ("user", "assistant", "system")]
    if history and history[-1] == last_user:
        history.pop()
    return answer_gate(completion.text, last_user, history, min_answer_chars(request, task_type, stated))


def _valid_tool_calls(request: ChatRequest, completion: Completion, *, schema: bool) -> bool:
    """Every call names a defined tool with a JSON object of arguments, valid against the tool's schema when
    `schema` (local/tool_schema.py): local models, whose text tool calls daari repairs, are checked; a hosted
    model's arguments are trusted (a client's
    own tool runner reports a bad one back to the model)."""
    return all(call_problem(request.tools, call, schema=schema) is None for call in completion.tool_calls)


class Judge:
    def __init__(self, config: ConfidenceConfig, questions: SideQuestions,
                 schema_checked: Collection[str] = ()) -> None:
        self.config = config
        self.questions = questions  # a self-evaluation asks the same tier a side question
        self.schema_checked = frozenset(schema_checked)  # tiers whose tool-call arguments must match the schema

    async def __call__(self, tier: str, request: ChatRequest, completion: Completion, *, allow_self_eval: bool,
                       task_type: str | None = None, rule_id: str | None = None,
                       payer: Payer | None = None) -> Judgement:
        def verdict(score: float, method: str, why: str | None = None) -> Judgement:
            return Judgement(round(score, 4), method, score >= passing_score(tier, method, self.config), why)

        if completion.tool_calls:
            schema = tier in self.schema_checked
            return verdict(1.0 if _valid_tool_calls(request, completion, schema=schema) else 0.0, "tool_calls")
        stated = read_stated_format(request)
        gated = gate(request, completion, task_type, stated)
        broken = answer_violations(request, completion, task_type, rule_id, stated) if gated is None else ()
        if tier == "L6":
            # Trusted (nothing to escalate to), but an empty, acknowledging, echoing or format-breaking answer is
            # still not stored.
            return Judgement(1.0, "frontier", True, gated if gated in NEVER_CACHED_AT_L6 else None, broken)
        if gated is not None:
            return verdict(0.0, "heuristic", gated)
        if broken:  # below any pass mark, whatever the configured one
            return Judgement(0.0, "answer_check", False, None, broken)
        probe = request.max_tokens is not None and request.max_tokens <= PROBE_MAX_TOKENS
        if completion.mean_logprob is not None and not probe:  # nobody reads a probe's answer: no grading it
            return verdict(logprob_confidence(completion.mean_logprob, self.config.logprob_floor), "logprob")
        if tier == "L3" or not allow_self_eval:
            return verdict(1.0, "heuristic")
        return verdict(await self._self_eval(tier, request, completion, payer), "self_eval")

    async def _self_eval(self, tier: str, request: ChatRequest, completion: Completion, payer: Payer | None) -> float:
        """The tier rates its own answer; a priced tier bills the question, counted to the request's `payer`."""
        question = last_user_text(request)  # the task, not a tool result that may close an agent turn
        reply = await self.questions.ask(tier, self_eval_messages(question, completion.text), request.model,
                                         max_tokens=4, purpose="self_check", payer=payer)
        rating = parse_self_eval(reply) if reply is not None else None
        return (rating or 0) / 5.0
