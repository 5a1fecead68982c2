"""`daari eval cache`: served-hit precision, false-hit rate and recall of L1 on labeled prompt pairs.

Runs offline with the real embedding model and verifier: each pair's two sides are folded and embedded
exactly as L1 does at run time; a pair is "served" when the lookup contexts match, cosine similarity
reaches the threshold, and the verifier agrees. Prints each verify mode beside cosine only, a threshold
sweep, and the public PAWS and QQP tuning files (each on its own, never merged).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from daari.protocol.chat import ChatRequest
from daari.protocol.openai_wire import parse_chat_request
from daari.semantic.context import lookup_context
from daari.semantic.fold import fold
from daari.semantic.lexical import Verdict, lexical_verdict

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SET = ROOT / "evals/cache/verification.jsonl"
SHARED_DATA = ROOT.parent / "shared/data"  # ../shared/data beside the checkout
MODES = ("none", "lexical", "model")
SWEEP = (0.70, 0.75, 0.80, 0.85, 0.88, 0.90, 0.92, 0.95)


@dataclass(frozen=True)
class Pair:
    id: str
    split: str  # "tune" (rules were tuned on it) or "heldout" (never tuned on)
    kind: str
    label: int  # 1: the same answer serves both
    a: str  # embed texts
    b: str
    same_context: bool


@dataclass(frozen=True)
class Scored:
    pair: Pair
    similarity: float
    verdicts: dict[str, Verdict]  # by verify mode


@dataclass(frozen=True)
class Figures:
    pairs: int
    positives: int
    negatives: int
    served: int
    true_hits: int
    false_hits: int

    @property
    def precision(self) -> float:
        return self.true_hits / self.served if self.served else 1.0

    @property
    def recall(self) -> float:
        return self.true_hits / self.positives if self.positives else 0.0

    @property
    def false_hit_rate(self) -> float:
        """Of the pairs that must not hit, the share that would be served."""
        return self.false_hits / self.negatives if self.negatives else 0.0

    def line(self) -> str:
        return (f"precision {self.precision:7.2%}  recall {self.recall:7.2%}  false-hit rate "
                f"{self.false_hit_rate:7.2%}  served {self.served:4d} ({self.false_hits} wrong) of "
                f"{self.pairs} pairs ({self.positives} must hit)")


def _request(side: str | dict[str, Any]) -> ChatRequest:
    body = {"model": "eval", "messages": [{"role": "user", "content": side}]} if isinstance(side, str) \
        else {"model": "eval", **side}
    return parse_chat_request(body, {})


def load_pairs(path: Path, cut: Callable[[list[str]], list[int]]) -> list[Pair]:
    """Read a labeled set and fold both sides as L1 does (`cut`: how much of each text the model sees)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    requests = [(_request(r["a"]), _request(r["b"])) for r in rows]
    folds = [(fold(a), fold(b)) for a, b in requests]
    texts = [f.embed_text for pair in folds for f in pair]
    seen = cut(texts)
    pairs = []
    for i, (row, (ra, rb), (fa, fb)) in enumerate(zip(rows, requests, folds, strict=True)):
        ta, tb = texts[2 * i], texts[2 * i + 1]
        ca = lookup_context(ra, fa, unseen_tail=ta[seen[2 * i]:])
        cb = lookup_context(rb, fb, unseen_tail=tb[seen[2 * i + 1]:])
        pairs.append(Pair(str(row.get("id", i)), str(row.get("split", "tune")), str(row.get("kind", "")),
                          int(row["label"]), ta[: seen[2 * i]], tb[: seen[2 * i + 1]], ca == cb))
    return pairs


def text_pairs(rows: Sequence[tuple[str, str, int]], name: str) -> list[Pair]:
    """Public sentence pairs as one-turn prompts (same context)."""
    return [Pair(f"{name}-{i}", name, name, label, f"user: {a}", f"user: {b}", True)
            for i, (a, b, label) in enumerate(rows)]


def read_paws(path: Path, limit: int) -> list[tuple[str, str, int]]:
    with path.open(newline="") as f:
        rows = [(r[1], r[2], int(r[3])) for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
                if len(r) == 4 and r[3] in ("0", "1")]
    return rows[:limit]


def read_qqp(path: Path, limit: int) -> list[tuple[str, str, int]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(r["a"], r["b"], int(r["label"])) for r in rows[:limit]]


def score(pairs: list[Pair], embed: Callable[[list[str]], Any], modes: Sequence[str],
          model_judge: Callable[[str, str], Verdict] | None = None, threshold: float = 0.0) -> list[Scored]:
    """Cosine and each mode's verdict per pair. The model is asked only where lexical agreed and the pair
    would reach the verifier at `threshold` (as at run time: the model costs a generation)."""
    vectors = np.asarray(embed([t for p in pairs for t in (p.a, p.b)]))
    scored = []
    for i, pair in enumerate(pairs):
        similarity = float(vectors[2 * i] @ vectors[2 * i + 1])
        verdicts: dict[str, Verdict] = {"none": Verdict(True)}
        lexical = lexical_verdict(pair.a, pair.b)
        if "lexical" in modes or "model" in modes:
            verdicts["lexical"] = lexical
        if "model" in modes:
            if not lexical.same or not pair.same_context or similarity < threshold or model_judge is None:
                verdicts["model"] = lexical if not lexical.same else Verdict(False, "model_not_asked")
            else:
                verdicts["model"] = model_judge(pair.a, pair.b)
        scored.append(Scored(pair, similarity, verdicts))
    return scored


def figures(scored: Sequence[Scored], mode: str, threshold: float) -> Figures:
    served = [s for s in scored if s.pair.same_context and s.similarity >= threshold and s.verdicts[mode].same]
    true_hits = sum(1 for s in served if s.pair.label == 1)
    positives = sum(1 for s in scored if s.pair.label == 1)
    return Figures(len(scored), positives, len(scored) - positives, len(served), true_hits,
                   len(served) - true_hits)


def report(title: str, scored: Sequence[Scored], modes: Sequence[str], threshold: float,
           out: Callable[[str], None] = print) -> None:
    out(f"\n== {title}: {len(scored)} pairs, threshold {threshold:.2f}")
    for mode in modes:
        out(f"  verify={mode:<8} {figures(scored, mode, threshold).line()}")
    out("  sweep (precision / recall)   " + "  ".join(f"{t:.2f}" for t in SWEEP))
    for mode in modes:
        cells = []
        for t in SWEEP:
            f = figures(scored, mode, t)
            cells.append(f"{f.precision:4.0%}/{f.recall:3.0%}")
        out(f"    {mode:<8}                   " + " ".join(cells))
    if "model" in modes:
        out(f"    (model: asked only at or above {threshold:.2f}; below it the sweep under-counts its recall)")


def _model_judge() -> Callable[[str, str], Verdict]:
    from daari.semantic.model_check import judge_blocking

    return judge_blocking


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daari eval cache", description=__doc__)
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="labeled pairs (JSONL)")
    parser.add_argument("--verify", choices=(*MODES, "all"), default=None,
                        help="verify mode to report beside cosine only (default: the configured one)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="similarity threshold (default: cache.l1.similarity_threshold)")
    parser.add_argument("--config", default=None, help="daari.yaml (default ./daari.yaml if present)")
    parser.add_argument("--public-limit", type=int, default=500,
                        help="pairs read from each public file (PAWS, QQP); 0 skips them")
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="directory of the public tuning files")
    args = parser.parse_args(argv)
    from daari.config import load_config
    from daari.semantic.minilm import load_minilm

    config_path = args.config or ("daari.yaml" if Path("daari.yaml").exists() else None)
    l1 = load_config(config_path).cache.l1
    threshold = args.threshold if args.threshold is not None else l1.similarity_threshold
    verify = args.verify or l1.verify
    modes = ["none", *([m for m in MODES if m != "none"] if verify == "all" else ([verify] if verify != "none"
                                                                                     else []))]
    if not args.set.exists():
        print(f"daari: no labeled set at {args.set}", file=sys.stderr)
        return 2
    model = load_minilm()
    judge = _model_judge() if "model" in modes else None
    pairs = load_pairs(args.set, model.seen_chars)
    scored = score(pairs, model.embed, modes, judge, threshold)
    print(f"daari eval cache: {args.set} (verify={verify}; 'none' is cosine only)")
    for split in sorted({p.split for p in pairs}):
        report(f"{args.set.name} [{split}]", [s for s in scored if s.pair.split == split], modes, threshold)
    report(f"{args.set.name} [all]", scored, modes, threshold)
    if args.public_limit > 0:
        for name, reader, file in (("PAWS-Wiki dev", read_paws, "paws_wiki_dev.tsv"),
                                   ("QQP tune", read_qqp, "qqp_tune.jsonl")):
            path = args.data / file
            if not path.exists():
                print(f"\n== {name}: {path} not found, skipped")
                continue
            public = text_pairs(reader(path, args.public_limit), name)
            lexical_modes = [m for m in modes if m != "model"]  # the model mode is slow: own corpus only
            report(f"{name} (first {len(public)} pairs)", score(public, model.embed, lexical_modes), lexical_modes,
                   threshold)
    return 0
