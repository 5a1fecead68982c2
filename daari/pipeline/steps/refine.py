"""Routing spec Phase B, the model-assisted stage of classification: an ambiguous heuristic result is put to the
first configured tier (routing/slm_classifier.py). Reads: `turn.classification`. Decides: a refined one when
the verdict is confident enough (daari_meta.classifier says which), its ceiling then raised like the heuristic's
for a task type that does not start at L3 (routing/l3_default.py). It runs after the shortcut tiers: a request
they answer never pays for a model call."""

from __future__ import annotations

from collections.abc import Collection

from daari.config import TIER_NAMES
from daari.pipeline.payer import payer_of
from daari.pipeline.side_query import SideQuestions
from daari.pipeline.step import Answer
from daari.pipeline.steps.classify import classified
from daari.pipeline.turn import Turn
from daari.routing.l3_default import L3_TASK_TYPES, l3_default
from daari.routing.slm_classifier import apply_verdict, classifier_messages, parse_verdict


class RefineStep:
    name = "refine"

    def __init__(self, tier: str, questions: SideQuestions, l3_task_types: Collection[str] = L3_TASK_TYPES) -> None:
        self.tier = tier  # the first configured tier: the cheapest model there is
        self.questions = questions
        self.l3_task_types = l3_task_types  # the classify step's: a verdict of L3 obeys the same evidence

    async def __call__(self, turn: Turn) -> Answer | None:
        heuristic = turn.classification
        if heuristic is None or not heuristic.ambiguous or turn.controls.tier_override is not None:
            return None
        request = turn.request
        reply = await self.questions.ask(self.tier, classifier_messages(request), request.model, max_tokens=64,
                                         purpose="classifier", payer=payer_of(turn))
        verdict = parse_verdict(reply) if reply is not None else None
        if verdict is not None and verdict.suggested_tier not in TIER_NAMES:
            verdict = None
        turn.meta.classifier = "slm" if verdict is not None else "slm_fallback"
        turn.classification = l3_default(apply_verdict(heuristic, verdict), self.l3_task_types)
        classified(turn.meta, turn.classification)
        return None
