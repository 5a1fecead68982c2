"""Routing spec step 9, the heuristic stage: task type, rule and tier ceiling (routing/classifier.py).

Reads: the parsed request. Decides: `turn.classification` and daari_meta's task_type, rule_id and ceiling (the
rules' ceiling, raised to L4 for a task type that does not start at L3: routing/l3_default.py). It
runs before the shortcut tiers (the spec puts it after them) because it is pure and cheap and every decision,
a shortcut's included, reports a classification; the model-assisted stage runs after them (steps/refine.py).
"""

from __future__ import annotations

from collections.abc import Collection

from daari.pipeline.meta import Meta
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.routing.classifier import Classification, LtProbe, classify, no_lt_probe
from daari.routing.l3_default import L3_TASK_TYPES, l3_default


class ClassifyStep:
    name = "classify"

    def __init__(self, lt_probe: LtProbe = no_lt_probe, l3_task_types: Collection[str] = L3_TASK_TYPES) -> None:
        self.lt_probe = lt_probe  # "would a tool tier act on this text?": a match is never ambiguous
        self.l3_task_types = l3_task_types  # the task types that may start at L3 (routing/l3_default.py)

    async def __call__(self, turn: Turn) -> Answer | None:
        classification = l3_default(classify(turn.request, self.lt_probe), self.l3_task_types)
        turn.classification = classification
        classified(turn.meta, classification)
        return None


def classified(meta: Meta, classification: Classification) -> None:
    meta.task_type = classification.task_type
    meta.rule_id = classification.rule_id
    meta.ceiling = classification.ceiling
