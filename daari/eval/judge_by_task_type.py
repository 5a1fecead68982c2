"""Judge figures per task type (`daari eval judge --by-task-type`) and the rule that decides from them which task
types start at L3 by default (daari/routing/l3_default.py L3_TASK_TYPES; docs/routing.md shows the table).

For the answers of one model, grouped by the task type daari's classifier gives their prompt: how many are good,
how many the L3 judge accepts, how many of those it accepts are bad (each with its Wilson 95% interval).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from daari.eval.judged import Judged
from daari.routing.classifier import classify
from daari.trust.wilson import Rate, rate

# The rule, fixed before the labels were read (docs/routing.md, "Which task types start at L3"):
MIN_ANSWERS = 10  # fewer labeled answers of a type: no evidence either way, today's default stays
MAX_BAD_ACCEPTED = 0.20  # the 95% upper bound of bad answers among those L3 accepts and serves
MIN_GOOD_SHARE = 0.50  # at least half of the model's answers good: else most requests pay an attempt, then climb

L3, NOT_L3, TOO_FEW = "L3", "L4 (not L3)", "too few answers: default kept"


@dataclass(frozen=True)
class GroupFigures:
    """One group's (a task type's, a rule's, a kind's) answers as the L3 judge saw them."""

    name: str
    answers: int
    good: int
    accepted: int
    bad_accepted: int
    good_rejected: int

    @property
    def good_rate(self) -> Rate:
        return rate(self.good, self.answers)

    @property
    def accepted_rate(self) -> Rate:
        return rate(self.accepted, self.answers)

    @property
    def bad_accepted_rate(self) -> Rate:
        """Bad answers among the accepted ones: what L3 would serve wrongly."""
        return rate(self.bad_accepted, self.accepted)


def verdict(group: GroupFigures) -> str:
    """L3 when the evidence says the model answers the type well and the judge keeps its bad answers out."""
    if group.answers < MIN_ANSWERS:
        return TOO_FEW
    if group.good_rate.rate >= MIN_GOOD_SHARE and group.bad_accepted_rate.high <= MAX_BAD_ACCEPTED:
        return L3
    return NOT_L3


def task_type_of(judged: Judged) -> str:
    return classify(judged.answer.request).task_type


def rule_of(judged: Judged) -> str:
    classification = classify(judged.answer.request)
    return f"{classification.task_type} {classification.rule_id}"


def grouped(judged: Sequence[Judged], accepts: Callable[[Judged], bool],
            key: Callable[[Judged], str]) -> list[GroupFigures]:
    """Figures per value of `key`, in name order."""
    groups: dict[str, list[Judged]] = {}
    for item in judged:
        groups.setdefault(key(item), []).append(item)
    return [GroupFigures(
        name=name, answers=len(items), good=sum(j.answer.good for j in items),
        accepted=sum(accepts(j) for j in items),
        bad_accepted=sum(accepts(j) and not j.answer.good for j in items),
        good_rejected=sum(j.answer.good and not accepts(j) for j in items)) for name, items in sorted(groups.items())]


def _share(value: Rate) -> str:
    return f"{value.hits:3d}/{value.samples:<3d} {value.rate:4.0%} ({value.low:3.0%}-{value.high:4.0%})"


def row(group: GroupFigures, with_verdict: bool) -> str:
    line = (f"  {group.name:<22} {_share(group.good_rate)}  {_share(group.accepted_rate)}  "
            f"{_share(group.bad_accepted_rate)}  {group.good_rejected:3d}")
    return f"{line}  {verdict(group)}" if with_verdict else line


def report(judged: Sequence[Judged], accepts: Callable[[Judged], bool],
           out: Callable[[str], None] = print) -> list[GroupFigures]:
    """The task type table with each type's verdict, then the same figures by rule and by kind (detail only)."""
    out(f"rule: L3 when a type has >= {MIN_ANSWERS} answers, >= {MIN_GOOD_SHARE:.0%} of them good, and the 95% "
        f"upper bound of bad among accepted <= {MAX_BAD_ACCEPTED:.0%}; fewer answers: today's default stays")
    header = (f"  {'':<22} {'good (95% CI)':<23}  {'L3 accepts':<23}  {'bad among accepted':<23}  "
              f"good rejected")
    types = grouped(judged, accepts, task_type_of)
    for title, groups, with_verdict in (("by task type", types, True),
                                        ("by rule (detail)", grouped(judged, accepts, rule_of), False),
                                        ("by kind (detail)", grouped(judged, accepts, lambda j: j.answer.kind),
                                         False)):
        out(f"\n{title}:\n{header}{'  verdict' if with_verdict else ''}")
        for group in groups:
            out(row(group, with_verdict))
    return types
