"""verify: pair_model — a learned pair classifier (gradient-boosted trees) over word order, roles and overlap.

The lexical rules that are right wherever they fire stay hard vetoes (numbers, negation, code, paths,
swaps, opposites: daari/semantic/pair_features.py); for the rest, small trees over the pair's features and
its cosine give the probability that one answer serves both prompts, served at or above the trained
threshold. The weights are daari/semantic/pair_model.json, written by evals/cache/train_verifier.py from the
tune halves only (docs/caching.md, "pair_model"). No model call: about a millisecond a pair (bench.verifier).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daari.errors import DaariError
from daari.semantic.lexical import Verdict
from daari.semantic.pair_features import FEATURE_NAMES, pair_features, veto

WEIGHTS = Path(__file__).with_name("pair_model.json")

Node = tuple[int, float, int, int, float]  # feature (-1: leaf), threshold (x < t goes left), left, right, leaf value


class PairModelError(DaariError):
    status = 500
    code = "pair_model_invalid"


@dataclass(frozen=True)
class PairModel:
    """Boosted trees: the sum of one leaf per tree, plus `base`, is the log-odds that the pair is the same."""

    base: float
    trees: tuple[tuple[Node, ...], ...]
    threshold: float  # the probability at or above which a candidate is served
    feature_names: tuple[str, ...]
    info: dict[str, Any]  # how and on what it was trained (for the eval's header and docs)

    def log_odds(self, x: list[float]) -> float:
        total = self.base
        for nodes in self.trees:
            k = 0
            while nodes[k][0] >= 0:
                feature, threshold, left, right, _ = nodes[k]
                k = left if x[feature] < threshold else right
            total += nodes[k][4]
        return total

    def probability(self, x: list[float]) -> float:
        z = self.log_odds(x)
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"kind": "gradient_boosted_trees", "features": list(self.feature_names), "base": self.base,
                "threshold": self.threshold, "trees": [[list(n) for n in t] for t in self.trees], "info": self.info}


def pair_model_from_json(data: dict[str, Any]) -> PairModel:
    """Check the weights match the features this code computes; a mismatch is a clear error, not a guess."""
    names = tuple(data.get("features", ()))
    if names != FEATURE_NAMES:
        raise PairModelError(f"pair model weights were trained on features {names}, this daari computes "
                             f"{FEATURE_NAMES}: retrain with evals/cache/train_verifier.py")
    trees = tuple(tuple((int(n[0]), float(n[1]), int(n[2]), int(n[3]), float(n[4])) for n in t)
                  for t in data["trees"])
    for nodes in trees:
        for feature, _, left, right, _ in nodes:
            if feature >= len(names) or (feature >= 0 and not (0 < left < len(nodes) and 0 < right < len(nodes))):
                raise PairModelError("pair model weights: a tree points outside itself")
    return PairModel(float(data["base"]), trees, float(data["threshold"]), names, dict(data.get("info", {})))


def load_pair_model(path: Path = WEIGHTS) -> PairModel:
    """The committed weights (about 50 KB of JSON; milliseconds). Blocking: run on a worker thread."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PairModelError(f"pair model weights not readable at {path}: {exc}") from exc
    return pair_model_from_json(data)


def pair_model_verdict(model: PairModel, a: str, b: str, cosine: float) -> Verdict:
    """Hard vetoes first, then the trees: served when the probability reaches the model's threshold."""
    vetoed = veto(a, b)
    if vetoed is not None:
        return vetoed
    p = model.probability(pair_features(a, b, cosine).tolist())
    if p >= model.threshold:
        return Verdict(True, None, f"pair_model: p={p:.3f}")
    return Verdict(False, "pair_model", f"p={p:.3f} below {model.threshold:.3f}")
