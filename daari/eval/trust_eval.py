"""`daari eval trust`: the learned L1 bars (`cache.l1.error_bound`) offline, on labeled prompt pairs: measured
false-hit rate against the bound.

Each labeled pair is a would-be L1 hit: side b looks up side a. Pairs that L1 would serve at the configured
threshold (the floor: same lookup context, cosine at or above it, the verifier agreeing) play the shadow
samples: a pair labeled "different answer" is a disagreement. The bars are fit on the fit split with the
server's estimator (daari/trust/bars.py, per task type of the request), then applied to the other split: the
served pairs' false-hit rate with its Wilson 95% interval, beside the fixed threshold's, and the recall kept.
The project's corpus fits on its tune split and is measured on its held-out split; the public PAWS and QQP
files (../shared/data) fit on their first half and are measured on the second, each on its own.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from daari.eval.cache_eval import (
    DEFAULT_SET,
    PAWS_FILE,
    QQP_FILE,
    Scored,
    _request,
    load_pairs,
    read_paws,
    read_qqp,
    score,
    shared_data_dir,
)
from daari.routing.classifier import classify
from daari.trust.bars import LearnedBars, Sample
from daari.trust.wilson import wilson


@dataclass(frozen=True)
class Served:
    served: int
    false_hits: int
    true_hits: int
    positives: int

    def line(self) -> str:
        low, high = wilson(self.false_hits, self.served)
        rate = self.false_hits / self.served if self.served else 0.0
        recall = self.true_hits / self.positives if self.positives else 0.0
        return (f"false-hit rate {rate:6.2%} (95% {low:6.2%}-{high:6.2%}; {self.false_hits:3d} of {self.served:4d} "
                f"served)  recall {recall:6.2%}")


def task_of(text: str) -> str:
    """The heuristic task type of a pair side as a one-message request (what the server keys bars on)."""
    body = text.removeprefix("user: ")
    return classify(_request(body)).task_type or "unknown"


def served(scored: Sequence[Scored], mode: str, bar_of: Callable[[Scored], float]) -> Served:
    hits = [s for s in scored if s.pair.same_context and s.similarity >= bar_of(s) and s.verdicts[mode].same]
    true_hits = sum(1 for s in hits if s.pair.label == 1)
    return Served(len(hits), len(hits) - true_hits, true_hits, sum(1 for s in scored if s.pair.label == 1))


def fit(scored: Sequence[Scored], mode: str, floor: float, bound: float, tasks: dict[str, str]) -> LearnedBars:
    samples: dict[str, list[Sample]] = defaultdict(list)
    for s in scored:
        if s.pair.same_context and s.similarity >= floor and s.verdicts[mode].same:
            samples[tasks[s.pair.id]].append(Sample(s.similarity, s.pair.label == 0))
    bars = LearnedBars(floor, bound)
    bars.fit(samples)
    return bars


def evaluate(title: str, fit_on: Sequence[Scored], measure_on: Sequence[Scored], modes: Sequence[str],
             floor: float, bounds: Sequence[float], tasks: dict[str, str], out: Callable[[str], None] = print) -> None:
    out(f"\n== {title}: fit on {len(fit_on)} pairs, measured on {len(measure_on)}, floor {floor:.2f}")
    for mode in modes:
        out(f"  verify={mode:<8} fixed threshold   {served(measure_on, mode, lambda s: floor).line()}")
        for bound in bounds:
            bars = fit(fit_on, mode, floor, bound, tasks)

            def bar_of(s: Scored, bars: LearnedBars = bars) -> float:
                return bars.threshold(tasks[s.pair.id])

            result = served(measure_on, mode, bar_of)
            raised = ", ".join(f"{t} {b.bar:.4f}" for t, b in sorted(bars.bars.items()) if b.raised) or "none"
            out(f"  verify={mode:<8} bound {bound:<5g}       {result.line()}  bars raised: {raised}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daari eval trust", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="labeled pairs (JSONL, with a split field)")
    parser.add_argument("--floor", type=float, default=None, help="the threshold (default: the configured one)")
    parser.add_argument("--bound", type=float, action="append", default=None,
                        help="error bounds to fit (repeatable; default 0.02 and 0.05)")
    parser.add_argument("--public-limit", type=int, default=2000, help="pairs read from PAWS and QQP (0: skip)")
    parser.add_argument("--data", type=Path, default=shared_data_dir(), help="directory of the public files")
    args = parser.parse_args(argv)
    from daari.config import load_config
    from daari.semantic.minilm import load_minilm

    config_path = "daari.yaml" if Path("daari.yaml").exists() else None
    floor = args.floor if args.floor is not None else load_config(config_path).cache.l1.similarity_threshold
    bounds = args.bound or [0.02, 0.05]
    if not args.set.exists():
        print(f"daari: no labeled set at {args.set}", file=sys.stderr)
        return 2
    model = load_minilm()
    modes = ["none", "lexical"]
    pairs = load_pairs(args.set, model.seen_chars)
    scored = score(pairs, model.embed, modes)
    tasks = {p.id: task_of(p.b) for p in pairs}
    print(f"daari eval trust: {args.set} (the verifier's verdict and cosine per pair; 'none' is cosine only)")
    evaluate(f"{args.set.name}: tune -> heldout", [s for s in scored if s.pair.split == "tune"],
             [s for s in scored if s.pair.split == "heldout"], modes, floor, bounds, tasks)
    if args.public_limit > 0:
        for name, reader, file in (("PAWS-Wiki dev", read_paws, PAWS_FILE), ("QQP tune", read_qqp, QQP_FILE)):
            path = args.data / file
            if not path.exists():
                print(f"\n== {name}: {path} not found, skipped")
                continue
            # The tune halves only (the report halves are the verifier's held-out figures).
            public = [p for p in reader(path) if p.split == "tune"][: args.public_limit]
            public_scored = score(public, model.embed, modes)
            public_tasks = {p.id: task_of(p.b) for p in public}
            half = len(public_scored) // 2
            evaluate(f"{name} (first {len(public)} pairs): first half -> second half", public_scored[:half],
                     public_scored[half:], modes, floor, bounds, public_tasks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
