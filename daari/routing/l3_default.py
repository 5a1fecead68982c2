"""Which task types start at L3 when L3 is the embedded model: the judge figures per task type decide. A request of
any other type whose rules say L3 starts at L4, so the embedded model answers it only where nothing above it is
configured (docs/routing.md, "Which task types start at L3")."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from daari import task_types as tt
from daari.routing.classifier import Classification

# From `daari eval judge --answers qwen_labeled.jsonl --by-task-type` (Qwen2.5-Coder-0.5B, 99 hand-labeled answers)
# and the rule in daari/eval/judge_by_task_type.py: generate_small failed it (28 of 92 answers good; 25 of the 45
# the judge accepts are bad), so it is left out. classify, extract and transform have too few labeled answers to
# decide (1, 1 and 5) and keep the spec's L3; agent_turn and generate_large are not in the set: their size rules
# decide them as before.
L3_TASK_TYPES: frozenset[str] = frozenset({tt.CLASSIFY, tt.EXTRACT, tt.TRANSFORM, tt.AGENT_TURN, tt.GENERATE_LARGE})


def l3_task_types(configured: Sequence[str] | None, l3_executor: str | None) -> frozenset[str]:
    """`routing.l3_task_types` when set; else the table's choice when L3 is the embedded model (the model the
    evidence is about), and every task type when L3 is another model (an upstream: nothing measured about it)."""
    if configured is not None:
        return frozenset(configured)
    return L3_TASK_TYPES if l3_executor == "embedded" else frozenset(tt.MODEL_TASK_TYPES)


def l3_default(classification: Classification, l3_task_types: Collection[str] = L3_TASK_TYPES) -> Classification:
    """The classification, its ceiling raised from L3 to L4 when its task type is not one that starts at L3. A probe
    (it never escalates) stays at L3 whatever its type: nobody reads its answer, so its quality does not matter."""
    if classification.ceiling != "L3" or classification.task_type in l3_task_types or not classification.escalate:
        return classification
    return replace(classification, ceiling="L4")
