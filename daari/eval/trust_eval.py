"""`daari eval trust`: the learned L1 bars (`cache.l1.error_bound`) offline, on labeled prompt pairs: measured
false-hit rate against the bound, per set and verify mode.

Each labeled pair is a would-be L1 hit: side b looks up side a. Only pairs the pair model never trained on are
used (the corpus's held-out split, PAWS-Wiki's and QQP's report halves: evals/cache/train_verifier.py trains on
the others), as live traffic is unseen by the verifier. Each set, on its own, is cut in two by a seeded
shuffle (`--seed`): the fit half plays the shadow samples (the pairs L1 would serve at the floor: same lookup
context, cosine at or above it, the verifier agreeing; a pair labeled "different answer" is a disagreement)
and the bars are fit on it with the server's estimator (daari/trust/bars.py, per task type of the request);
the bars are then applied to the measured half: its served pairs' false-hit rate with a Wilson 95% interval,
against the bound, beside the fixed threshold's, and the recall kept.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daari.eval.cache_eval import (
    DEFAULT_SET,
    PAWS_FILE,
    QQP_FILE,
    Pair,
    Scored,
    _request,
    load_pairs,
    read_paws,
    read_qqp,
    score,
    shared_data_dir,
)
from daari.routing.classifier import classify
from daari.trust.bars import LearnedBars, Sample, bar_above
from daari.trust.wilson import wilson

SEED = 20  # the number: any fixed seed; documented so every figure can be reproduced
BOUNDS = (0.01, 0.02, 0.05)
MODES = ("none", "lexical", "pair_model")  # "model" asks a generation per pair: `daari eval cache` only


@dataclass(frozen=True)
class TrustSet:
    key: str
    title: str
    rule: str  # which pairs, in words (the docs' table says the same)


CORPUS = TrustSet("corpus_heldout", "corpus held back", 'verification.jsonl, "split": "heldout"')
PAWS = TrustSet("paws_report", "PAWS-Wiki report", f"{PAWS_FILE}, even ids")
QQP = TrustSet("qqp_report", "QQP report", f"{QQP_FILE}, even line numbers (1-based)")
SETS = (CORPUS.key, PAWS.key, QQP.key)


@dataclass(frozen=True)
class Served:
    served: int
    false_hits: int
    true_hits: int
    positives: int

    @property
    def rate(self) -> float:
        return self.false_hits / self.served if self.served else 0.0

    @property
    def recall(self) -> float:
        return self.true_hits / self.positives if self.positives else 0.0


def task_of(text: str) -> str:
    """The heuristic task type of a pair side as a one-message request (what the server keys bars on)."""
    body = text.removeprefix("user: ")
    return classify(_request(body)).task_type or "unknown"


def served(scored: Sequence[Scored], mode: str, bar_of: Callable[[Scored], float]) -> Served:
    hits = [s for s in scored if s.pair.same_context and s.similarity >= bar_of(s) and s.verdicts[mode].same]
    true_hits = sum(1 for s in hits if s.pair.label == 1)
    return Served(len(hits), len(hits) - true_hits, true_hits, sum(1 for s in scored if s.pair.label == 1))


Estimator = Callable[[list[Sample], float, float], float]  # (samples, floor, bound) -> the bar


def upper_bound_estimator(shut_when_unsure: bool) -> Estimator:
    """A variant, for comparison only: the lowest candidate bar whose served samples' Wilson 95% upper bound
    is within the bound; when none is, the highest candidate (as the server's) or 1.0 (L1 shut for the type)."""

    def bar(samples: list[Sample], floor: float, bound: float) -> float:
        false_hits = [s.similarity for s in samples if s.disagreed and s.similarity >= floor]
        candidates = sorted({floor, *(bar_above(similarity) for similarity in false_hits)})
        for t in candidates:
            above = [s for s in samples if s.similarity >= t]
            if above and wilson(sum(1 for s in above if s.disagreed), len(above))[1] <= bound:
                return t
        return 1.0 if shut_when_unsure else candidates[-1]

    return bar


# "observed" is the server's estimator (daari/trust/bars.py, through LearnedBars); the others are the variants
# docs/caching.md compares it with.
VARIANTS: dict[str, Estimator] = {"wilson": upper_bound_estimator(False),
                                  "wilson_or_shut": upper_bound_estimator(True)}
ESTIMATORS = ("observed", *VARIANTS)


def fit(scored: Sequence[Scored], mode: str, floor: float, bound: float, tasks: dict[str, str],
        estimator: str = "observed") -> dict[str, float]:
    """The bar per task type, fit on the pairs L1 would serve at the floor (label 0: a disagreement)."""
    samples: dict[str, list[Sample]] = defaultdict(list)
    for s in scored:
        if s.pair.same_context and s.similarity >= floor and s.verdicts[mode].same:
            samples[tasks[s.pair.id]].append(Sample(s.similarity, s.pair.label == 0))
    if estimator != "observed":
        return {task: VARIANTS[estimator](rows, floor, bound) for task, rows in samples.items()}
    bars = LearnedBars(floor, bound)
    bars.fit(samples)
    return {task: bar.bar for task, bar in bars.bars.items()}


def split_halves(scored: Sequence[Scored], seed: int) -> tuple[list[Scored], list[Scored]]:
    """A seeded shuffle cut in two: (fit half, measured half); the same seed gives the same halves."""
    order = list(scored)
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    return order[:half], order[half:]


def seeded_sample(pairs: Sequence[Pair], limit: int | None, seed: int) -> list[Pair]:
    """At most `limit` pairs drawn with the seed, kept in file order (None: all of them)."""
    if limit is None or limit >= len(pairs):
        return list(pairs)
    chosen = sorted(random.Random(seed).sample(range(len(pairs)), limit))
    return [pairs[i] for i in chosen]


def evaluate(trust_set: TrustSet, scored: Sequence[Scored], modes: Sequence[str], floor: float,
             bounds: Sequence[float], seed: int, estimator: str = "observed") -> list[dict[str, Any]]:
    """One row per mode with the fixed threshold (bound None) and one per mode and bound with learned bars."""
    tasks = {s.pair.id: task_of(s.pair.b) for s in scored}
    fit_on, measure_on = split_halves(scored, seed)
    rows = []
    for mode in modes:
        for bound in (None, *bounds):
            bars = fit(fit_on, mode, floor, bound, tasks, estimator) if bound is not None else {}

            def bar_of(s: Scored, bars: dict[str, float] = bars) -> float:
                return bars.get(tasks[s.pair.id], floor)

            result, on_fit = served(measure_on, mode, bar_of), served(fit_on, mode, bar_of)
            low, high = wilson(result.false_hits, result.served)
            rows.append({"set": trust_set.key, "title": trust_set.title, "rule": trust_set.rule, "mode": mode,
                         "bound": bound, "estimator": estimator, "fit_pairs": len(fit_on),
                         "measured_pairs": len(measure_on), "served": result.served,
                         "false_hits": result.false_hits, "rate": result.rate, "low": low, "high": high,
                         "recall": result.recall, "within_bound": None if bound is None else result.rate <= bound,
                         "fit_served": on_fit.served, "fit_false_hits": on_fit.false_hits,
                         "raised": {t: b for t, b in sorted(bars.items()) if b > floor}})
    return rows


def print_rows(rows: Sequence[dict[str, Any]], floor: float, out: Callable[[str], None] = print) -> None:
    last = None
    for r in rows:
        if r["set"] != last:
            out(f"\n== {r['title']} [{r['rule']}]: fit on {r['fit_pairs']} pairs, measured on {r['measured_pairs']}, "
                f"floor {floor:.2f}")
            last = r["set"]
        bars = "fixed threshold" if r["bound"] is None else f"bound {r['bound']:<5g}"
        verdict = "" if r["within_bound"] is None else ("  within bound" if r["within_bound"] else "  ABOVE bound")
        raised = "" if r["bound"] is None else \
            "  bars raised: " + (", ".join(f"{t} {b:.4f}" for t, b in r["raised"].items()) or "none")
        out(f"  verify={r['mode']:<10} {bars:<15} false-hit rate {r['rate']:6.2%} (95% {r['low']:6.2%}-"
            f"{r['high']:6.2%}; {r['false_hits']:3d} of {r['served']:4d} served)  recall {r['recall']:6.2%}  "
            f"[fit half: {r['fit_false_hits']} of {r['fit_served']}]{verdict}{raised}")


def run(corpus: Path, data: Path, modes: Sequence[str], floor: float, bounds: Sequence[float], seed: int,
        public_limit: int | None, out: Callable[[str], None] = print, estimator: str = "observed",
        sets: Sequence[str] = SETS) -> list[dict[str, Any]]:
    """Score each set once and evaluate it on its own (the rows of the table in docs/caching.md)."""
    from daari.semantic.minilm import load_minilm

    model = load_minilm()
    rows = []
    if CORPUS.key in sets:
        heldout = [p for p in load_pairs(corpus, model.seen_chars) if p.split == "heldout"]
        rows += evaluate(CORPUS, score(heldout, model.embed, modes), modes, floor, bounds, seed, estimator)
    if public_limit != 0:
        for trust_set, reader, file in ((PAWS, read_paws, PAWS_FILE), (QQP, read_qqp, QQP_FILE)):
            if trust_set.key not in sets:
                continue
            path = data / file
            if not path.exists():
                out(f"(daari eval trust: {path} not found, {trust_set.title} skipped)")
                continue
            report = seeded_sample([p for p in reader(path) if p.split == "report"], public_limit, seed)
            rows += evaluate(trust_set, score(report, model.embed, modes), modes, floor, bounds, seed, estimator)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daari eval trust", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="labeled pairs (JSONL, with a split field)")
    parser.add_argument("--config", default=None, help="daari.yaml (default ./daari.yaml if present)")
    parser.add_argument("--floor", type=float, default=None,
                        help="the floor (default: the configured cache.l1.similarity_threshold)")
    parser.add_argument("--bound", type=float, action="append", default=None,
                        help=f"error bounds to fit (repeatable; default {', '.join(map(str, BOUNDS))})")
    parser.add_argument("--verify", default=",".join(MODES),
                        help=f"verify modes, comma-separated (from {', '.join(MODES)}; default all three)")
    parser.add_argument("--public-limit", type=int, default=None,
                        help="at most N pairs of each public file's report half, a seeded sample (default: all; "
                             "0 skips them)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"the halves' shuffle and the sample (default {SEED})")
    parser.add_argument("--data", type=Path, default=None, help="directory of the public files (default: "
                                                                "shared/data beside the checkout)")
    parser.add_argument("--sets", default=",".join(SETS), help=f"sets, comma-separated (default {','.join(SETS)})")
    parser.add_argument("--estimator", default="observed", choices=ESTIMATORS,
                        help="observed: the server's (default); wilson, wilson_or_shut: the variants the docs "
                             "compare it with")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON, nothing else")
    args = parser.parse_args(argv)
    from daari.config import load_config

    config_path = args.config or ("daari.yaml" if Path("daari.yaml").exists() else None)
    floor = args.floor if args.floor is not None else load_config(config_path).cache.l1.similarity_threshold
    bounds = args.bound or list(BOUNDS)
    modes = args.verify.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(f"daari: unknown verify mode {', '.join(unknown)} (choose from {', '.join(MODES)})", file=sys.stderr)
        return 2
    sets = args.sets.split(",")
    if any(key not in SETS for key in sets):
        print(f"daari: unknown set in {args.sets!r} (choose from {', '.join(SETS)})", file=sys.stderr)
        return 2
    if not args.set.exists():
        print(f"daari: no labeled set at {args.set}", file=sys.stderr)
        return 2
    data = args.data or shared_data_dir()
    out: Callable[[str], None] = (lambda _line: None) if args.json else print
    out(f"daari eval trust: {args.set} and {data} (seed {args.seed}, estimator {args.estimator}; 'none' is cosine "
        "only)")
    rows = run(args.set, data, modes, floor, bounds, args.seed, args.public_limit, out, args.estimator, sets)
    if args.json:
        print(json.dumps({"floor": floor, "seed": args.seed, "public_limit": args.public_limit,
                          "estimator": args.estimator, "rows": rows}, indent=1))
        return 0
    print_rows(rows, floor, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
