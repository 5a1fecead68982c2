"""A finishing step, before render: offers a sample of answers to the ShadowActor (docs/caching.md, "Trust"), and
notes every cache hit's answer for the diversity figures.

Before render, not after: a routed request runs under its client watch, which cancels the request's scope once
the connection reports the response complete, so a step after render is cut off at render's last send. This
step never awaits (a draw, a counter, a `tell`), so it cannot be cancelled midway and costs the response well
under a microsecond when the draw says no.

Reads: the answer (its tier), the request, daari_meta (classification, L1 entry and similarity), the
User-Agent (client family). Decides: nothing for the client. Sampling is a
random draw at `trust.shadow.rate` (cache hits) or `tier_rate` (L2-L4 answers), then the per-minute cap and
the day's token budget; an answer with tool calls is never sampled. The sample is told (never waits): a full
mailbox drops it, counted. Planning the shadow call, the call and the comparison happen in the actor.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from actors.runtime import Address
from actors.shadow import ShadowSample
from daari.budget.payer import Payer
from daari.budget.project import stated_directory
from daari.metrics import Metrics
from daari.pipeline.decision import client_family
from daari.pipeline.payer import payer_of
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.trust.diversity import DiversityTracker, answer_fingerprint
from daari.trust.plan import TIER_EVAL_LEVELS
from daari.trust.sampling import ShadowBudget

FINGERPRINTS = 4096  # L0 keys whose answer fingerprint is remembered (an L0 key always has the same answer)


class ShadowStep:
    name = "shadow"

    def __init__(self, shadow: Address | None, budget: ShadowBudget, diversity: DiversityTracker,
                 skips: Counter[str], metrics: Metrics, spend_allowed: Callable[[Payer], bool] | None = None) -> None:
        self.shadow = shadow  # None: no ShadowActor (both rates 0): only diversity is noted
        self.budget = budget
        self.spend_allowed = spend_allowed  # the budget caps (BudgetPlanner.under_soft_caps); None: no caps
        self.diversity = diversity
        self.skips = skips
        # Held, not looked up per call: this step runs on every hit (metrics.py, "per-request callers").
        self._drawn = metrics.counter("shadow_drawn_total", ("kind",))
        self._skipped = metrics.counter("shadow_skipped_total", ("reason",))
        self._l0_answers: dict[str, str] = {}  # L0 key -> answer fingerprint (an L0 key keeps its answer)

    async def __call__(self, turn: Turn, answer: Answer) -> None:
        tier = answer.tier
        if tier == "L0" or tier == "L1":
            kind = "cache"
            self._note_diversity(turn, answer, tier)
        elif tier in TIER_EVAL_LEVELS:
            kind = "tier"
        else:
            return
        if self.shadow is None or not self.budget.drawn(kind):
            return
        self._drawn.inc((kind,))
        if answer.completion.tool_calls:  # an agent turn's tool calls are never asked again
            self._skip("tool_calls")
            return
        if self.spend_allowed is not None and not self.spend_allowed(payer_of(turn)):
            self._skip("budget_cap")  # a shadow call is daari's own spend: never once a cap nears its mark
            return
        why_not = self.budget.admit()
        if why_not is not None:
            self._skip(why_not)
            return
        if not self.shadow.tell(self._sample(turn, answer, kind)):
            self._skip("mailbox_full")

    def _sample(self, turn: Turn, answer: Answer, kind: str) -> ShadowSample:
        meta, classification = turn.meta, turn.classification
        task_type, rule_id, ceiling = meta.task_type, meta.rule_id, meta.ceiling
        entry_id = similarity = None
        if answer.tier == "L1":
            # L1 reports "cache_hit" as its task type; the request's own classification is what the bars key on.
            if classification is not None:
                task_type, rule_id, ceiling = (classification.task_type, classification.rule_id,
                                               classification.ceiling)
            entry_id, similarity = meta.details.get("entry_id"), meta.details.get("similarity")
        return ShadowSample(kind, answer.tier, turn.request, answer.completion, task_type, rule_id, ceiling,
                            client_family(turn.headers.get("user-agent")),
                            int(entry_id) if isinstance(entry_id, int) else None,
                            float(similarity) if isinstance(similarity, int | float) else None,
                            turn.controls.tier_override, payer_of(turn),
                            None if turn.meta.details.get("project") else (
                                turn.headers.get("x-daari-repo") or stated_directory(turn.request)))

    def _note_diversity(self, turn: Turn, answer: Answer, tier: str) -> None:
        key = turn.key
        if not key:
            return
        if tier == "L0":
            fingerprint = self._l0_answers.get(key)
            if fingerprint is None:
                if len(self._l0_answers) >= FINGERPRINTS:
                    self._l0_answers.clear()  # cheaper than an LRU on every hit; refilled as hits come
                fingerprint = self._l0_answers[key] = answer_fingerprint(answer.completion.text)
            self.diversity.add(turn.meta.task_type, key, fingerprint)
            return
        classification = turn.classification
        self.diversity.add(classification.task_type if classification is not None else turn.meta.task_type, key,
                           answer_fingerprint(answer.completion.text))

    def _skip(self, reason: str) -> None:
        self.skips[reason] += 1
        self._skipped.inc((reason,))
