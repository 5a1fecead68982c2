"""`daari eval cache`: served-hit precision and recall of L1 per verify mode, on each labeled set on its own.

Runs offline with the real embedding model and verifiers: each pair's two sides are folded and embedded
exactly as L1 does at run time; a pair is "served" when the lookup contexts match, cosine similarity
reaches the threshold, and the verifier agrees. The table (docs/caching.md) has one row per set and mode,
never merged: daari's corpus held back (split "heldout"), PAWS-Wiki's report half (even ids), QQP's report
half (even line numbers), and the corpus's negation and antonym pairs; each with its target. The tune
halves (odd PAWS ids, odd QQP lines, the corpus's "tune" split) are what evals/cache/train_verifier.py
trains on; they are printed apart, marked as such.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
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
MODES = ("none", "lexical", "pair_model", "model")
SWEEP = (0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95)
PAWS_FILE, QQP_FILE = "paws_wiki_dev.tsv", "qqp_tune.jsonl"
NEGATION_KINDS = frozenset({"negation", "antonym"})

Embed = Callable[[list[str]], Any]


def shared_data_dir(start: Path = ROOT) -> Path:
    """`shared/data` beside the checkout or beside any folder above it (a worktree sits one level deeper)."""
    for parent in start.parents:
        candidate = parent / "shared/data"
        if candidate.is_dir():
            return candidate
    return start.parent / "shared/data"


@dataclass(frozen=True)
class Pair:
    id: str
    split: str  # corpus: "tune" | "heldout"; public sets: "tune" (odd) | "report" (even)
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


@dataclass(frozen=True)
class Target:
    """What a set must reach: served-hit precision at least, recall at least, at most this many served."""

    min_precision: float | None = None
    min_recall: float | None = None
    max_served: int | None = None

    def met(self, f: Figures) -> bool:
        return ((self.min_precision is None or f.precision >= self.min_precision)
                and (self.min_recall is None or f.recall >= self.min_recall)
                and (self.max_served is None or f.served <= self.max_served))

    def text(self) -> str:
        parts = []
        if self.min_precision is not None:
            parts.append(f"precision >= {self.min_precision:.0%}")
        if self.min_recall is not None:
            parts.append(f"recall >= {self.min_recall:.0%}")
        if self.max_served is not None:
            parts.append(f"{self.max_served} served")
        return ", ".join(parts)


@dataclass(frozen=True)
class EvalSet:
    """One row group of the table: a name, the rule that picks its pairs, its target."""

    key: str
    title: str
    rule: str
    target: Target


CORPUS_HELDOUT = EvalSet("corpus_heldout", "corpus held back", 'verification.jsonl, "split": "heldout"',
                         Target(min_precision=0.99, min_recall=0.80))
PAWS_REPORT = EvalSet("paws_report", "PAWS-Wiki report", f"{PAWS_FILE}, even ids", Target(min_precision=0.95))
QQP_REPORT = EvalSet("qqp_report", "QQP report", f"{QQP_FILE}, even line numbers (1-based)",
                     Target(min_precision=0.95))
NEGATIONS = EvalSet("negation_antonym", "negation and antonym pairs",
                    'verification.jsonl, "kind": "negation" or "antonym", both splits', Target(max_served=0))
TABLE_SETS = (CORPUS_HELDOUT, PAWS_REPORT, QQP_REPORT, NEGATIONS)
# Trained on (evals/cache/train_verifier.py): shown for reference, never the figures that decide.
TUNE_SETS = (EvalSet("corpus_tune", "corpus tune (trained on)", 'verification.jsonl, "split": "tune"', Target()),
             EvalSet("paws_tune", "PAWS-Wiki tune (trained on)", f"{PAWS_FILE}, odd ids", Target()),
             EvalSet("qqp_tune", "QQP tune (trained on)", f"{QQP_FILE}, odd line numbers", Target()))


def members(key: str, scored: Sequence[Scored]) -> list[Scored]:
    """The pairs of one set (by the rule in its EvalSet)."""
    rules: dict[str, Callable[[Pair], bool]] = {
        "corpus_heldout": lambda p: p.kind != "paws" and p.kind != "qqp" and p.split == "heldout",
        "corpus_tune": lambda p: p.kind not in ("paws", "qqp") and p.split == "tune",
        "negation_antonym": lambda p: p.kind in NEGATION_KINDS,
        "paws_report": lambda p: p.kind == "paws" and p.split == "report",
        "paws_tune": lambda p: p.kind == "paws" and p.split == "tune",
        "qqp_report": lambda p: p.kind == "qqp" and p.split == "report",
        "qqp_tune": lambda p: p.kind == "qqp" and p.split == "tune",
    }
    return [s for s in scored if rules[key](s.pair)]


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


def read_paws(path: Path) -> list[Pair]:
    """PAWS-Wiki pairs as one-turn prompts; split by id: odd ids tune, even ids report."""
    pairs = []
    with path.open(newline="") as f:
        for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(r) == 4 and r[3] in ("0", "1") and r[0].isdigit():
                split = "tune" if int(r[0]) % 2 else "report"
                pairs.append(Pair(f"paws-{r[0]}", split, "paws", int(r[3]), f"user: {r[1]}", f"user: {r[2]}", True))
    return pairs


def read_qqp(path: Path) -> list[Pair]:
    """QQP pairs as one-turn prompts; split by 1-based line number: odd lines tune, even lines report."""
    pairs = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            r = json.loads(line)
            split = "tune" if number % 2 else "report"
            pairs.append(Pair(f"qqp-{number}", split, "qqp", int(r["label"]), f"user: {r['a']}", f"user: {r['b']}",
                              True))
    return pairs


def embed_in_batches(embed: Embed, texts: list[str], batch: int = 64) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Embed many texts in batches of similar length (little padding), returned in the input order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: np.ndarray[Any, np.dtype[np.float32]] = np.zeros((len(texts), 384), dtype=np.float32)
    for start in range(0, len(order), batch):
        chunk = order[start:start + batch]
        out[chunk] = np.asarray(embed([texts[i] for i in chunk]), dtype=np.float32)
    return out


def similarities(pairs: Sequence[Pair], embed: Embed) -> list[float]:
    vectors = embed_in_batches(embed, [t for p in pairs for t in (p.a, p.b)])
    return [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(pairs))]


def score(pairs: list[Pair], embed: Embed, modes: Sequence[str],
          model_judge: Callable[[str, str], Verdict] | None = None, threshold: float = 0.0,
          sims: Sequence[float] | None = None) -> list[Scored]:
    """Cosine and each mode's verdict per pair. The model is asked only where lexical agreed and the pair
    would reach the verifier at `threshold` (as at run time: the model costs a generation)."""
    sims = similarities(pairs, embed) if sims is None else sims
    pair_model = None
    if "pair_model" in modes:
        from daari.semantic.pair_model import load_pair_model

        pair_model = load_pair_model()
    scored = []
    for pair, similarity in zip(pairs, sims, strict=True):
        verdicts: dict[str, Verdict] = {"none": Verdict(True)}
        lexical = lexical_verdict(pair.a, pair.b)
        if "lexical" in modes or "model" in modes:
            verdicts["lexical"] = lexical
        if pair_model is not None:
            from daari.semantic.pair_model import pair_model_verdict

            verdicts["pair_model"] = pair_model_verdict(pair_model, pair.a, pair.b, similarity)
        if "model" in modes:
            if not lexical.same or not pair.same_context or similarity < threshold or model_judge is None:
                verdicts["model"] = lexical if not lexical.same else Verdict(False, "model_not_asked")
            else:
                verdicts["model"] = model_judge(pair.a, pair.b)
        scored.append(Scored(pair, similarity, verdicts))
    return scored


def figures(scored: Iterable[Scored], mode: str, threshold: float) -> Figures:
    scored = list(scored)
    served = [s for s in scored if s.pair.same_context and s.similarity >= threshold and s.verdicts[mode].same]
    true_hits = sum(1 for s in served if s.pair.label == 1)
    positives = sum(1 for s in scored if s.pair.label == 1)
    return Figures(len(scored), positives, len(scored) - positives, len(served), true_hits,
                   len(served) - true_hits)


def mistakes(scored: Sequence[Scored], mode: str, threshold: float, limit: int) -> dict[str, list[list[Any]]]:
    """Up to `limit` pairs the mode served wrongly and pairs it missed: [a, b, similarity, verdict rule]."""
    wrong: list[list[Any]] = []
    missed: list[list[Any]] = []
    for s in scored:
        served = s.pair.same_context and s.similarity >= threshold and s.verdicts[mode].same
        row = [s.pair.a.removeprefix("user: "), s.pair.b.removeprefix("user: "), round(s.similarity, 3),
               s.verdicts[mode].rule]
        if served and s.pair.label == 0 and len(wrong) < limit:
            wrong.append(row)
        elif not served and s.pair.label == 1 and len(missed) < limit:
            missed.append(row)
    return {"wrong": wrong, "missed": missed}


def table(scored: Sequence[Scored], modes: Sequence[str], threshold: float,
          sets: Sequence[EvalSet] = TABLE_SETS, examples: int = 0) -> list[dict[str, Any]]:
    """One row per set and mode: the figures and whether the set's target is met (JSON-able); with
    `examples`, up to that many pairs it served wrongly and missed."""
    rows = []
    for s in sets:
        part = members(s.key, scored)
        if not part:
            continue
        for mode in modes:
            if mode == "model" and s.key not in ("corpus_heldout", "corpus_tune", "negation_antonym"):
                continue  # a generation per pair: the corpus only
            f = figures(part, mode, threshold)
            rows.append({"set": s.key, "title": s.title, "rule": s.rule, "mode": mode, **asdict(f),
                         "precision": f.precision, "recall": f.recall, "target": s.target.text(),
                         "met": s.target.met(f) if s.target.text() else None,
                         **({"examples": mistakes(part, mode, threshold, examples)} if examples else {})})
    return rows


def print_table(rows: Sequence[dict[str, Any]], threshold: float, out: Callable[[str], None] = print) -> None:
    out(f"\n{'set (rule)':<58} {'verify':<11} {'precision':>9} {'recall':>7} {'served (wrong)':>15}  target")
    last = None
    for r in rows:
        head = f"{r['title']} ({r['pairs']} pairs, {r['positives']} must hit)" if r["set"] != last else ""
        if r["set"] != last:
            out(f"  [{r['rule']}]")
        last = r["set"]
        met = "" if r["met"] is None else ("met" if r["met"] else "NOT met")
        target = f"{r['target']}: {met}" if r["target"] else ""
        out(f"{head:<58} {r['mode']:<11} {r['precision']:>9.1%} {r['recall']:>7.1%} "
            f"{r['served']:>8} ({r['false_hits']:>3})  {target}")
    out(f"(threshold {threshold:.2f}; served = same lookup context, cosine >= threshold, verifier agrees)")
    for r in rows:
        for kind, pairs in r.get("examples", {}).items():
            for a, b, similarity, rule in pairs:
                out(f"  {r['title']}, {r['mode']} {kind}: {a!r} / {b!r} (cosine {similarity}, rule {rule})")


def sweep(title: str, scored: Sequence[Scored], modes: Sequence[str], out: Callable[[str], None] = print) -> None:
    out(f"\n== threshold sweep, {title} (precision / recall)\n   {'':<11}" + "".join(f"{t:>10.2f}" for t in SWEEP))
    for mode in modes:
        cells = []
        for t in SWEEP:
            f = figures(scored, mode, t)
            cells.append(f"{f.precision:5.0%}/{f.recall:3.0%}")
        out(f"   {mode:<11}" + "".join(f"{c:>10}" for c in cells))


def _model_judge() -> Callable[[str, str], Verdict]:
    from daari.semantic.model_check import judge_blocking

    return judge_blocking


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daari eval cache", description=__doc__)
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="labeled pairs (JSONL)")
    parser.add_argument("--verify", default=None,
                        help="verify modes to report beside cosine only, comma-separated (none, lexical, "
                             "pair_model, model; default: the configured one; 'all' is every mode, model on the "
                             "corpus only: it asks the embedded model once per pair)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="similarity threshold (default: cache.l1.similarity_threshold)")
    parser.add_argument("--config", default=None, help="daari.yaml (default ./daari.yaml if present)")
    parser.add_argument("--public-limit", type=int, default=None,
                        help="at most N pairs of each public file's report and tune halves (default: all; 0 skips)")
    parser.add_argument("--tune", action="store_true", help="also print the tune halves (what was trained on)")
    parser.add_argument("--data", type=Path, default=None, help="directory of the public files (default: "
                                                                "shared/data beside the checkout)")
    parser.add_argument("--json", action="store_true", help="print the table as JSON, nothing else")
    parser.add_argument("--examples", type=int, default=0, metavar="N",
                        help="list up to N pairs each mode served wrongly and N it missed, per set")
    args = parser.parse_args(argv)
    from daari.config import load_config
    from daari.semantic.minilm import load_minilm

    config_path = args.config or ("daari.yaml" if Path("daari.yaml").exists() else None)
    l1 = load_config(config_path).cache.l1
    threshold = args.threshold if args.threshold is not None else l1.similarity_threshold
    verify = args.verify or l1.verify
    asked = list(MODES) if verify == "all" else verify.split(",")
    unknown = [m for m in asked if m not in MODES]
    if unknown:
        print(f"daari: unknown verify mode {', '.join(unknown)} (choose from {', '.join(MODES)}, all)",
              file=sys.stderr)
        return 2
    modes = ["none", *[m for m in MODES if m != "none" and m in asked]]
    if not args.set.exists():
        print(f"daari: no labeled set at {args.set}", file=sys.stderr)
        return 2
    out: Callable[[str], None] = (lambda _line: None) if args.json else print
    model = load_minilm()
    judge = _model_judge() if "model" in modes else None
    corpus = load_pairs(args.set, model.seen_chars)
    scored = score(corpus, model.embed, modes, judge, threshold)
    data = args.data or shared_data_dir()
    public: list[Pair] = []
    if args.public_limit != 0:
        for name, reader, file in (("PAWS-Wiki", read_paws, PAWS_FILE), ("QQP", read_qqp, QQP_FILE)):
            path = data / file
            if not path.exists():
                out(f"(daari eval cache: {path} not found, {name} skipped)")
                continue
            pairs = reader(path)
            halves = ["report", "tune"] if args.tune else ["report"]
            for half in halves:
                public += [p for p in pairs if p.split == half][: args.public_limit]
    public_modes = [m for m in modes if m != "model"]  # the model mode is slow: own corpus only
    if public:
        scored += score(public, model.embed, public_modes, None, threshold)
    rows = table(scored, modes, threshold, TABLE_SETS + (TUNE_SETS if args.tune else ()), args.examples)
    if args.json:
        print(json.dumps({"threshold": threshold, "modes": modes, "rows": rows}, indent=1))
        return 0
    out(f"daari eval cache: {args.set} and {data} (verify={verify}; 'none' is cosine only)")
    print_table(rows, threshold, out)
    corpus_scored = [s for s in scored if s.pair.kind not in ("paws", "qqp")]
    sweep(f"{args.set.name}, all splits", corpus_scored, modes, out)
    if "model" in modes:
        out(f"   (model: asked only at or above {threshold:.2f}; below it the sweep under-counts its recall)")
    return 0
