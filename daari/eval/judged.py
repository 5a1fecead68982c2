"""Each labeled answer as the judge sees it: the gate, the answer checks' violations, the logprob score; what
`daari eval judge` and its per-task-type table both score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from daari.config import ConfidenceConfig
from daari.eval.judge_set import LabeledAnswer
from daari.pipeline.steps.judge import gate
from daari.routing.classifier import classify
from daari.routing.confidence import logprob_confidence
from daari.trust.answer_check import answer_violations
from daari.trust.stated_format import read_stated_format


@dataclass(frozen=True)
class Judged:
    """One answer and what every rule looks at: the gate, the violations, the logprob score."""

    answer: LabeledAnswer
    gate: str | None
    violations: tuple[str, ...]
    logprob_score: float | None


def judge_all(answers: Sequence[LabeledAnswer], confidence: ConfidenceConfig) -> list[Judged]:
    judged = []
    for row in answers:
        classification = classify(row.request)
        completion = row.completion()
        stated = read_stated_format(row.request)
        gated = gate(row.request, completion, classification.task_type, stated)
        violations = () if gated is not None else answer_violations(
            row.request, completion, classification.task_type, classification.rule_id, stated)
        score = None if row.mean_logprob is None else logprob_confidence(row.mean_logprob, confidence.logprob_floor)
        judged.append(Judged(row, gated, violations, score))
    return judged
