"""Train the pair model of `cache.l1.verify: pair_model` and write daari/semantic/pair_model.json.

    python evals/cache/train_verifier.py [--data DIR] [--similarities FILE.npy] [--out FILE]

Trains ONLY on the tune halves: daari's corpus pairs with "split": "tune", PAWS-Wiki pairs with odd ids and
QQP pairs on odd line numbers (1-based). The held-back corpus pairs, even PAWS ids and even QQP lines are
never read here: they are what `daari eval cache` reports. Pairs a hard veto rejects, pairs whose lookup
contexts differ and pairs below cosine FLOOR never reach the model, so they are left out of its training.

The serving threshold is chosen on out-of-fold predictions (5 folds of the tune data): the lowest
probability at which the corpus tune part keeps served-hit precision >= 99% and PAWS tune >= 95%, both at
the default similarity threshold. QQP is printed, not constrained: no setting tried reaches 95% on it out
of fold, at any bar (evals/cache/qqp_frontier.py; docs/caching.md, "Why QQP stays below 95%, measured").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from boosting import Settings, fit, predict  # noqa: E402

from daari.config import L1Config  # noqa: E402
from daari.eval.cache_eval import (  # noqa: E402
    DEFAULT_SET,
    PAWS_FILE,
    QQP_FILE,
    Pair,
    load_pairs,
    read_paws,
    read_qqp,
    shared_data_dir,
    similarities,
)
from daari.semantic.pair_features import FEATURE_NAMES, pair_features, veto  # noqa: E402
from daari.semantic.pair_model import WEIGHTS, pair_model_from_json  # noqa: E402

FLOOR = 0.60  # pairs below this cosine are not trained on (the lowest threshold the eval sweeps)
CORPUS_WEIGHT = 20.0  # daari's own prompt pairs are few beside PAWS and QQP, and they are the traffic L1 sees
SETTINGS = Settings(trees=150, depth=3, learning_rate=0.1, min_hessian=5.0)
FOLDS = 5
MIN_PRECISION = {"corpus": 0.99, "paws": 0.95}  # the targets themselves, out of fold


def tune_pairs(data: Path) -> list[Pair]:
    from daari.semantic.minilm import load_minilm

    corpus = [p for p in load_pairs(DEFAULT_SET, load_minilm().seen_chars) if p.split == "tune"]
    paws = [p for p in read_paws(data / PAWS_FILE) if p.split == "tune"]
    qqp = [p for p in read_qqp(data / QQP_FILE) if p.split == "tune"]
    assert all(p.split == "tune" for p in corpus + paws + qqp)  # never a report or held-back pair
    return corpus + paws + qqp


def source(pair: Pair) -> str:
    return pair.kind if pair.kind in ("paws", "qqp") else "corpus"


def precision_recall(scores: np.ndarray, y: np.ndarray, eligible: np.ndarray, t: float) -> tuple[float, float, int]:
    served = eligible & (scores >= t)
    hits = int((served & (y == 1)).sum())
    return (hits / served.sum() if served.sum() else 1.0), hits / max(1, int((y == 1).sum())), int(served.sum())


def tune_similarities(pairs: list[Pair], cached: Path | None) -> np.ndarray:
    """The pairs' cosines: read from `cached` when it exists (embedding thousands of pairs takes minutes), else
    computed with the embedded model and written there."""
    if cached is not None and cached.exists():
        sims: np.ndarray = np.load(cached)
        assert len(sims) == len(pairs), "the cached similarities are of another set of pairs"
        return sims
    from daari.semantic.minilm import load_minilm

    sims = np.array(similarities(pairs, load_minilm().embed))
    if cached is not None:
        np.save(cached, sims)
    return sims


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help="the public files (default: shared/data)")
    parser.add_argument("--similarities", type=Path, default=None,
                        help="a .npy of the pairs' cosines: read if it exists, else computed and written there")
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    args = parser.parse_args(argv)
    started = time.monotonic()
    pairs = tune_pairs(args.data or shared_data_dir())
    sims = tune_similarities(pairs, args.similarities)
    print(f"{len(pairs)} tune pairs embedded ({time.monotonic() - started:.0f}s)")
    threshold = L1Config().similarity_threshold
    src = np.array([source(p) for p in pairs])
    y = np.array([p.label for p in pairs], dtype=np.float64)
    vetoed = np.array([not p.same_context or veto(p.a, p.b) is not None for p in pairs])
    x = np.array([pair_features(p.a, p.b, s) for p, s in zip(pairs, sims, strict=True)])
    trained = ~vetoed & (sims >= FLOOR)
    weight = np.where(src == "corpus", CORPUS_WEIGHT, 1.0)
    rows = np.flatnonzero(trained)
    fold = np.random.default_rng(0).integers(0, FOLDS, len(rows))
    oof = np.zeros(len(pairs))
    for f in range(FOLDS):
        part = fit(x[rows[fold != f]], y[rows[fold != f]], weight[rows[fold != f]], SETTINGS)
        oof[rows[fold == f]] = predict(part, x[rows[fold == f]])
    eligible = trained & (sims >= threshold)
    chosen = None
    for t in np.arange(0.50, 0.995, 0.01):
        if all(precision_recall(oof[src == s], y[src == s], eligible[src == s], t)[0] >= bar
               for s, bar in MIN_PRECISION.items()):
            chosen = round(float(t), 2)
            break
    if chosen is None:
        print("no threshold keeps the corpus and PAWS tune precision bars", file=sys.stderr)
        return 1
    print(f"threshold {chosen} (out-of-fold, similarity >= {threshold}):")
    for s in ("corpus", "paws", "qqp"):
        p, r, n = precision_recall(oof[src == s], y[src == s], eligible[src == s], chosen)
        print(f"  {s:<7} precision {p:.1%}  recall {r:.1%}  served {n}")
    model = fit(x[rows], y[rows], weight[rows], SETTINGS)
    info = {"trained_on": "verification.jsonl split=tune, PAWS-Wiki odd ids, QQP odd lines",
            "pairs": int(len(rows)), "corpus_weight": CORPUS_WEIGHT, "floor": FLOOR, "settings": vars(SETTINGS),
            "threshold_rule": "lowest out-of-fold threshold with corpus tune precision >= 99% and PAWS tune >= 95%"}
    data = {"kind": "gradient_boosted_trees", "features": list(FEATURE_NAMES), "base": model["base"],
            "threshold": chosen, "info": info,
            "trees": [[[j, round(t, 6), left, right, round(v, 6)] for j, t, left, right, v in nodes]
                      for nodes in model["trees"]]}
    pair_model_from_json(data)  # the file daari will read must load
    import json

    args.out.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB, {len(model['trees'])} trees) "
          f"in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
