"""Gradient-boosted trees for the pair model, fitted in numpy (training only; daari reads the JSON it writes).

Log-loss, histogram splits on up to 32 quantile bins per feature, depth-limited trees, Newton leaf values
shrunk by the learning rate, per-sample weights. Small on purpose: a few thousand pairs, ~20 features.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
Node = tuple[int, float, int, int, float]


@dataclass(frozen=True)
class Settings:
    trees: int = 150
    depth: int = 3
    learning_rate: float = 0.1
    l2: float = 1.0
    min_hessian: float = 5.0
    bins: int = 32


def _edges(x: Array, bins: int) -> list[Array]:
    return [np.unique(np.quantile(x[:, j], np.linspace(0, 1, bins + 1)[1:-1])) for j in range(x.shape[1])]


def fit(x: Array, y: Array, weight: Array, settings: Settings = Settings()) -> dict[str, Any]:
    """Fit on rows `x` (n x d) with labels `y` in {0, 1}; returns {"base": log-odds, "trees": [[node...]...]}
    where a node is (feature, threshold, left, right, value); feature -1 is a leaf, x < threshold goes left."""
    edges = _edges(x, settings.bins)
    binned = np.stack([np.searchsorted(e, x[:, j], side="right") for j, e in enumerate(edges)], axis=1)
    prior = float(np.clip(np.average(y, weights=weight), 1e-3, 1 - 1e-3))
    base = float(np.log(prior / (1 - prior)))
    raw = np.full(len(y), base)
    trees: list[list[Node]] = []
    for _ in range(settings.trees):
        p = 1 / (1 + np.exp(-raw))
        g, h = (p - y) * weight, p * (1 - p) * weight
        nodes: list[Node] = []

        def grow(rows: npt.NDArray[np.intp], level: int, g: Array = g, h: Array = h,
                 nodes: list[Node] = nodes) -> int:
            index = len(nodes)
            nodes.append((-1, 0.0, -1, -1, 0.0))
            total_g, total_h = g[rows].sum(), h[rows].sum()
            best: tuple[float, int, int] | None = None
            if level < settings.depth and len(rows) > 1:
                for j in range(x.shape[1]):
                    width = len(edges[j]) + 1
                    gl = np.cumsum(np.bincount(binned[rows, j], weights=g[rows], minlength=width))[:-1]
                    hl = np.cumsum(np.bincount(binned[rows, j], weights=h[rows], minlength=width))[:-1]
                    gr, hr = total_g - gl, total_h - hl
                    ok = (hl >= settings.min_hessian) & (hr >= settings.min_hessian)
                    if not ok.any():
                        continue
                    gain = np.where(ok, gl ** 2 / (hl + settings.l2) + gr ** 2 / (hr + settings.l2)
                                    - total_g ** 2 / (total_h + settings.l2), -np.inf)
                    b = int(np.argmax(gain))
                    if gain[b] > 1e-9 and (best is None or gain[b] > best[0]):
                        best = (float(gain[b]), j, b)
            if best is None:
                value = float(-total_g / (total_h + settings.l2) * settings.learning_rate)
                nodes[index] = (-1, 0.0, -1, -1, value)
                raw[rows] += value
                return index
            _, j, b = best
            go_left = binned[rows, j] <= b
            left = grow(rows[go_left], level + 1)
            right = grow(rows[~go_left], level + 1)
            nodes[index] = (j, float(edges[j][b]), left, right, 0.0)
            return index

        grow(np.arange(len(y)), 0)
        trees.append(nodes)
    return {"base": base, "trees": trees}


def predict(model: dict[str, Any], x: Array) -> Array:
    raw = np.full(len(x), float(model["base"]))
    for nodes in model["trees"]:
        k = np.zeros(len(x), dtype=np.intp)
        for _ in range(64):
            feature = np.array([nodes[i][0] for i in k])
            inner = feature >= 0
            if not inner.any():
                break
            threshold = np.array([nodes[i][1] for i in k])
            left = np.array([nodes[i][2] for i in k])
            right = np.array([nodes[i][3] for i in k])
            value_x = x[np.arange(len(x)), np.where(inner, feature, 0)]
            k = np.where(inner, np.where(value_x < threshold, left, right), k)
        raw += np.array([nodes[i][4] for i in k])
    return 1 / (1 + np.exp(-raw))
