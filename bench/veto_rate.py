"""`python -m bench.veto_rate`: could L1 refute a lookup without the model? How often the verifier's hard vetoes,
which do not read the cosine, reject a pair of unrelated prompts, and how often the pair model would reject a pair
no veto rejects at its most favourable cosine (the trees' highest probability over every cosine split at or above
the similarity threshold). Random pairs of different prompts from evals/cache/verification.jsonl and the public
QQP pairs (../shared/data, when present), each embedded as L1 folds a one-turn chat (`user: ...`).
docs/performance.md, "The attention fused" (considered, not built).

    python -m bench.veto_rate                   # 1,000 pairs per set
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from bench.report import Table, machine, print_tables
from daari.semantic.pair_features import pair_features, veto
from daari.semantic.pair_model import PairModel, load_pair_model

ROOT = Path(__file__).resolve().parents[1]
QQP = ROOT.parent / "shared" / "data" / "qqp_tune.jsonl"
THRESHOLD = 0.70  # cache.l1.similarity_threshold's default: no candidate below it is verified


def prompts(path: Path, limit: int) -> list[str]:
    texts: list[str] = []
    for line in path.read_text().splitlines()[:limit]:
        row = json.loads(line)
        texts += [row[side] for side in ("a", "b") if isinstance(row[side], str)]
    return texts


def best_probability(model: PairModel, a: str, b: str) -> float:
    """The pair model's highest probability for this pair over every cosine from THRESHOLD to 1 (its trees are
    constant between their cosine splits, so those points cover every value)."""
    points = {THRESHOLD, 1.0} | {node[1] for tree in model.trees for node in tree
                                 if node[0] == 0 and THRESHOLD < node[1] <= 1.0}
    x = pair_features(a, b, 1.0).tolist()
    best = 0.0
    for cosine in points:
        x[0] = cosine
        best = max(best, model.probability(x))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.veto_rate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000)
    args = parser.parse_args(argv)
    model = load_pair_model()
    sets = {"corpus (evals/cache/verification.jsonl)": prompts(ROOT / "evals" / "cache" / "verification.jsonl", 10**6)}
    if QQP.is_file():
        sets["QQP (tune file)"] = prompts(QQP, 3000)
    table = Table(f"Random pairs of different prompts ({args.pairs} per set)",
                  ["set", "a hard veto rejects", "no veto; the trees reject at every cosine", "veto check, median us"])
    rng = random.Random(1)
    for name, texts in sets.items():
        vetoed = refuted = 0
        spent = []
        for _ in range(args.pairs):
            a, b = (f"user: {t}" for t in rng.sample(texts, 2))
            started = time.perf_counter()
            rejected = veto(a, b) is not None
            spent.append(time.perf_counter() - started)
            if rejected:
                vetoed += 1
            elif best_probability(model, a, b) < model.threshold:
                refuted += 1
        table.add(name, f"{vetoed / args.pairs:.1%}", f"{refuted} of {args.pairs - vetoed}",
                  f"{statistics.median(spent) * 1e6:.0f}")
    print_tables([table], [machine()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
