"""Routing spec step 9, the heuristic stage: task type, rule and tier ceiling (routing/classifier.py).

Reads: the parsed request. Decides: `turn.classification` and daari_meta's task_type, rule_id and ceiling. It
runs before the shortcut tiers (the spec puts it after them) because it is pure and cheap and every decision,
a shortcut's included, reports a classification; the model-assisted stage runs after them (steps/refine.py).
"""

from __future__ import annotations

from daari.pipeline.meta import Meta
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.routing.classifier import Classification, LtProbe, classify, no_lt_probe


class ClassifyStep:
    name = "classify"

    def __init__(self, lt_probe: LtProbe = no_lt_probe) -> None:
        self.lt_probe = lt_probe  # "would a tool tier act on this text?": a match is never ambiguous

    async def __call__(self, turn: Turn) -> Answer | None:
        classification = classify(turn.request, self.lt_probe)
        turn.classification = classification
        classified(turn.meta, classification)
        return None


def classified(meta: Meta, classification: Classification) -> None:
    meta.task_type = classification.task_type
    meta.rule_id = classification.rule_id
    meta.ceiling = classification.ceiling
