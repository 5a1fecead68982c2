"""`daari eval judge`: each tier's rule set on the labeled answers of evals/judge, offline.

For each rule set, how many answers it accepts, how many of those break the format their prompt stated
(goal: at most 2% at the local tiers), how many good answers it rejects, and how many bad answers it lets
through (format or content). The rule sets are those of daari/pipeline/steps/judge.py, composed the same way:
- spec: the routing spec's check alone (more than 10 characters, no refusal);
- gates: daari's gates before issue 19 (empty, short, refusal, acknowledgement, echo);
- L3: gates, then the answer checks (daari/trust), then logprobs (where the answer has them: SmolLM2's);
- L4/L5: gates and answer checks (their self-evaluation asks a model: not run offline);
- L6: trusted, every answer served; the answer checks decide only whether it is cached.

`--answers qwen_labeled.jsonl` scores the default embedded model's labeled answers instead of the set's;
`--by-task-type` prints the L3 figures per task type and which types start at L3 (daari/eval/judge_by_task_type.py).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from daari.config import ConfidenceConfig
from daari.eval.judge_set import DEFAULT_DIR, LabeledAnswer, load_answers
from daari.eval.judged import Judged, judge_all
from daari.routing.confidence import heuristic_confidence, passing_score
from daari.trust.wilson import wilson

GOAL = 0.02  # at most this share of accepted answers may break their prompt's stated format




@dataclass(frozen=True)
class RuleSet:
    name: str
    accepts: Callable[[Judged], bool]


def rule_sets(confidence: ConfidenceConfig) -> list[RuleSet]:
    l3_mark = passing_score("L3", "logprob", confidence)
    return [
        RuleSet("spec (> 10 chars, no refusal)", lambda j: heuristic_confidence(j.answer.answer) > 0),
        RuleSet("gates (before issue 19)", lambda j: j.gate is None),
        RuleSet("L3: gates + checks + logprob", lambda j: j.gate is None and not j.violations
                and (j.logprob_score is None or j.logprob_score >= l3_mark)),
        RuleSet("L4/L5: gates + checks", lambda j: j.gate is None and not j.violations),
        RuleSet("L6: trusted (served)", lambda j: True),
    ]


@dataclass(frozen=True)
class Figures:
    answers: int
    good: int
    accepted: int
    format_broken_accepted: int
    good_rejected: int
    bad_accepted: int
    content_bad_accepted: int  # bad answers that meet their format: beyond a format judge

    @property
    def format_broken_share(self) -> float:
        return self.format_broken_accepted / self.accepted if self.accepted else 0.0

    def line(self) -> str:
        low, high = wilson(self.format_broken_accepted, self.accepted)
        good_share = self.good_rejected / self.good if self.good else 0.0
        return (f"accepted {self.accepted:4d}/{self.answers:<4d} format-broken {self.format_broken_accepted:3d} "
                f"({self.format_broken_share:6.1%}, 95% CI {low:5.1%}-{high:5.1%})  good rejected "
                f"{self.good_rejected:3d}/{self.good} ({good_share:5.1%})  bad accepted {self.bad_accepted:3d} "
                f"({self.content_bad_accepted} format-ok)")


def figures(judged: Sequence[Judged], accepts: Callable[[Judged], bool]) -> Figures:
    accepted = [j for j in judged if accepts(j)]
    return Figures(
        answers=len(judged), good=sum(j.answer.good for j in judged), accepted=len(accepted),
        format_broken_accepted=sum(not j.answer.format_ok for j in accepted),
        good_rejected=sum(j.answer.good and not accepts(j) for j in judged),
        bad_accepted=sum(not j.answer.good for j in accepted),
        content_bad_accepted=sum(not j.answer.good and j.answer.format_ok for j in accepted))


def cacheable(j: Judged) -> bool:
    """What L6 would store: an answer with no violations (and not empty, acknowledging or echoing)."""
    return not j.violations and j.gate not in ("empty", "acknowledgement", "echo")


def report(judged: Sequence[Judged], confidence: ConfidenceConfig, out: Callable[[str], None] = print,
           listing: bool = False) -> dict[str, Figures]:
    answers = [j.answer for j in judged]
    broken = sum(not a.format_ok for a in answers)
    out(f"{len(answers)} answers to {len({a.prompt_id for a in answers})} prompts: {sum(a.good for a in answers)} "
        f"good, {len(answers) - sum(a.good for a in answers)} bad, {broken} break their prompt's stated format; "
        f"sources: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(a.source for a in answers).items())))
    out(f"goal: at most {GOAL:.0%} of the answers a local tier accepts break their stated format\n")
    results: dict[str, Figures] = {}
    for rules in rule_sets(confidence):
        results[rules.name] = found = figures(judged, rules.accepts)
        out(f"  {rules.name:<30} {found.line()}")
    stored = [j for j in judged if cacheable(j)]
    out(f"  {'L6: cached':<30} cached {len(stored)}/{len(judged)}, of which format-broken "
        f"{sum(not j.answer.format_ok for j in stored)}, good not cached "
        f"{sum(j.answer.good and not cacheable(j) for j in judged)}")
    local = rule_sets(confidence)[2].accepts
    out("\nL3 by split (tune: written beside the rules; holdout: never tuned on), by source and by kind:")
    keys: tuple[tuple[str, Callable[[LabeledAnswer], str]], ...] = (
        ("split", lambda a: a.split), ("source", lambda a: a.source), ("kind", lambda a: a.kind))
    for label, key in keys:
        for value in sorted({key(j.answer) for j in judged}):
            group = [j for j in judged if key(j.answer) == value]
            out(f"  {label} {value:<17} {figures(group, local).line()}")
    caught = Counter(v for j in judged if not j.answer.format_ok for v in (*j.violations, *(j.gate or "",)) if v)
    out("\nwhat caught the format-broken answers: " + ", ".join(f"{k} {v}" for k, v in caught.most_common()))
    false_alarms = [j for j in judged if j.answer.good and (j.violations or j.gate)]
    out(f"good answers held back: {len(false_alarms)}" + "".join(
        f"\n  {j.answer.id}: {', '.join((*(j.gate or '',), *j.violations)).strip(', ')}" for j in false_alarms))
    if listing:
        missed = [j for j in judged if not j.answer.format_ok and not j.violations and j.gate is None]
        out(f"\nformat-broken answers the checks let through: {len(missed)}" + "".join(
            f"\n  {j.answer.id}: {j.answer.why} {j.answer.answer[:70]!r}" for j in missed))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daari eval judge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the set: prompts.jsonl and answers.jsonl")
    parser.add_argument("--config", default=None, help="daari.yaml for the confidence marks (default: built-in)")
    parser.add_argument("--list", action="store_true", help="also list the format-broken answers let through")
    parser.add_argument("--answers", default="answers.jsonl",
                        help="the labeled answers file in --dir (qwen_labeled.jsonl: the default embedded model's)")
    parser.add_argument("--by-task-type", action="store_true",
                        help="L3's figures per task type and the routing verdict of each (docs/routing.md)")
    args = parser.parse_args(argv)
    if not (args.dir / args.answers).exists():
        print(f"daari: no judge set at {args.dir}", file=sys.stderr)
        return 2
    confidence = ConfidenceConfig()
    if args.config is not None:
        from daari.config import load_config

        confidence = load_config(args.config).confidence
    print(f"daari eval judge: {args.dir / args.answers}")
    judged = judge_all(load_answers(args.dir, args.answers), confidence)
    if args.by_task_type:
        from daari.eval.judge_by_task_type import report as by_task_type

        by_task_type(judged, rule_sets(confidence)[2].accepts)
        return 0
    report(judged, confidence, listing=args.list)
    return 0
