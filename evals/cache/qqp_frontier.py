"""Is label noise what keeps the pair model's QQP precision below 95%? Measured out of fold, tune halves only.

    python evals/cache/qqp_frontier.py [--data DIR] [--similarities FILE.npy] [--examples N]

Reads ONLY what evals/cache/train_verifier.py trains on: the corpus's "split": "tune" pairs, PAWS-Wiki odd
ids and QQP odd line numbers. Never an even PAWS id, an even QQP line or a held-back corpus pair. For each
setting (the committed features; those plus candidate features for focus differences; QQP weighed up) it
fits the trees out of fold (5 folds, as the training script does) and prints the precision-recall frontier
on the QQP tune half beside the corpus tune and PAWS tune figures at the same probability, and whether the
three bars hold together (corpus precision >= 99% and recall >= 80%, PAWS >= 95%, QQP >= 95%). Then it
sorts the QQP false hits of the committed setting at its threshold into classes by stated rules (below) and
prints the counts with examples, and the label noise among QQP pairs that are the same question once
folded (what no verifier that serves them can get right).

Classes of a served pair labeled "not duplicate" (the first rule that matches names it):
- `identical_words` (label noise, strict rule): the same words in the same order once lower-cased, light-
  stemmed ("customs" / "custom") and stripped of punctuation (symbols such as # kept) and of the articles
  a, an, the.
- `same_question` (label noise, loose rule): the same content words in the same order once folded as the
  lexical rules fold them (stemmed, synonyms folded, framing, filler and function words dropped), and the
  same question word. An upper bound on noise: the folding also hides real differences ("What do you
  fear?" / "What is fear?").
- `wh_word`: the question word differs (what / which / how / why / who / where / when / is / can / should).
- `reordered`: the same folded content words in another order (roles exchanged).
- `framing`: the same folded content words and order; a function or framing word differs ("you" / "we").
- `extra_constraint`: one side's content words contain the other's and add some: a qualifier or constraint
  on one side only ("best city in Canada" / "best city to live in in Canada").
- `different_entity`: each side has content words the other lacks, one of them a name (capitalized inside
  the question) or a rare word (IDF above the tune data's median of content-word IDFs).
- `other_substitution`: each side has content words the other lacks, none rare.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from boosting import Settings, fit, predict  # noqa: E402
from train_verifier import CORPUS_WEIGHT, FLOOR, FOLDS, SETTINGS, source, tune_pairs, tune_similarities  # noqa: E402

from daari.config import L1Config  # noqa: E402
from daari.eval.cache_eval import Pair, shared_data_dir  # noqa: E402
from daari.semantic.lexical import features, stem  # noqa: E402
from daari.semantic.pair_features import pair_features, veto, words  # noqa: E402

QUESTION_WORDS = ("what", "which", "how", "why", "who", "whom", "whose", "where", "when", "is", "are", "can",
                  "could", "should", "would", "will", "do", "does", "did")
PREPOSITIONS = frozenset("in to for with on at from by of about without after before into during than".split())
_PLAIN = re.compile(r"[a-z0-9]+|[^a-z0-9\s?.!,;:'\"]")  # words and symbols ("#", "()"); not punctuation
_NAME = re.compile(r"(?<=\w )[A-Z][a-z]+")

EXTRA_NAMES = ("idf_only_max_side", "idf_only_min_side", "idf_only_share", "idf_rarest_only",
               "superset_extra", "wh_word_differs", "preposition_only_one_side", "content_length_ratio")


def content(text: str) -> list[str]:
    return [x for x in features(text).sequence if not x.startswith("<")]


def idf_table(texts: Sequence[str]) -> dict[str, float]:
    """Inverse document frequency of folded content words over the tune texts (no labels read)."""
    df: Counter[str] = Counter()
    for text in texts:
        df.update(set(content(text)))
    n = len(texts)
    return {w: math.log((n + 1) / (c + 1)) + 1 for w, c in df.items()}


def question_word(text: str) -> str:
    """The first question word of the text, "" if none: what kind of answer is asked for."""
    return next((w for w in words(text) if w in QUESTION_WORDS), "")


def is_question(text: str) -> bool:
    """A question rather than an instruction: ends with "?" or opens with a question word."""
    plain_text = text.removeprefix("user: ").strip()
    return plain_text.endswith("?") or (words(plain_text) or [""])[0] in QUESTION_WORDS


def extra_features(a: str, b: str, idf: dict[str, float], unseen: float) -> list[float]:
    """Candidate features for focus differences (EXTRA_NAMES order)."""
    ca, cb = set(content(a)), set(content(b))
    weight = [idf.get(w, unseen) for w in ca - cb], [idf.get(w, unseen) for w in cb - ca]
    sums = sum(weight[0]), sum(weight[1])
    total = sum(idf.get(w, unseen) for w in ca | cb)
    wa, wb = Counter(w for w in words(a) if w in PREPOSITIONS), Counter(w for w in words(b) if w in PREPOSITIONS)
    superset = len(ca ^ cb) if (ca < cb or cb < ca) else 0
    return [max(sums), min(sums), sum(sums) / total if total else 0.0, max(weight[0] + weight[1], default=0.0),
            float(superset), float(question_word(a) != question_word(b)), float(sum(((wa - wb) + (wb - wa)).values())),
            min(len(ca), len(cb)) / max(1, len(ca), len(cb))]


def plain(text: str) -> list[str]:
    """Lower-case light-stemmed words without punctuation and articles: what the strict noise rule compares."""
    tokens = _PLAIN.findall(text.removeprefix("user: ").lower())
    return [stem(w) for w in tokens if w not in ("a", "an", "the")]


def classify(a: str, b: str, idf: dict[str, float], rare: float) -> str:
    """The class of a false hit (module docstring: the first rule that matches)."""
    if plain(a) == plain(b):
        return "identical_words"
    sa, sb = content(a), content(b)
    ca, cb = set(sa), set(sb)
    asked = question_word(a) == question_word(b)
    if ca == cb and asked and _dedup(sa) == _dedup(sb):
        return "same_question"
    if not asked:
        return "wh_word"
    if ca == cb:
        return "reordered" if _dedup(sa) != _dedup(sb) else "framing"
    if ca < cb or cb < ca:
        return "extra_constraint"
    only = ca ^ cb
    names = {n.lower() for n in _NAME.findall(a.removeprefix("user: ")) + _NAME.findall(b.removeprefix("user: "))}
    if any(idf.get(w, rare + 1) > rare for w in only) or any(n in names for n in only):
        return "different_entity"
    return "other_substitution"


def _dedup(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


ALIGN_NAMES = ("align_worst_a", "align_worst_b", "align_mean_a", "align_mean_b", "align_unmatched_max",
               "align_unmatched_sum")


def token_alignment(pairs: Sequence[Pair], rows: Sequence[int], batch: int = 32) -> np.ndarray:
    """BERTScore-like features from the embedder's token vectors (ALIGN_NAMES order), for `rows` only: per
    token of one side, its best cosine with any token of the other; the worst, the mean, and how many fall
    below 0.6 (a word the other side has nothing like). The role marker, [CLS] and [SEP] are left out."""
    import torch

    from daari.semantic.minilm import MAX_TOKENS, load_minilm

    model = load_minilm()
    texts = [t.removeprefix("user: ") for i in rows for t in (pairs[i].a, pairs[i].b)]
    order = sorted(range(len(texts)), key=lambda k: len(texts[k]))
    vectors: list[np.ndarray] = [np.zeros((0, 384))] * len(texts)
    for start in range(0, len(order), batch):
        chunk = order[start:start + batch]
        encoded = model.tokenizer([texts[k] for k in chunk], padding=True, truncation=True,
                                  max_length=MAX_TOKENS, return_tensors="pt")
        with torch.inference_mode():
            hidden = model.model(**encoded).last_hidden_state
        hidden = torch.nn.functional.normalize(hidden, p=2, dim=2).numpy()
        for n, k in enumerate(chunk):
            length = int(encoded["attention_mask"][n].sum())
            vectors[k] = hidden[n, 1:length - 1]
    out = np.zeros((len(pairs), len(ALIGN_NAMES)))
    for n, i in enumerate(rows):
        va, vb = vectors[2 * n], vectors[2 * n + 1]
        if not len(va) or not len(vb):
            continue
        sim = va @ vb.T
        best_a, best_b = sim.max(axis=1), sim.max(axis=0)
        un_a, un_b = float((best_a < 0.6).sum()), float((best_b < 0.6).sum())
        out[i] = [best_a.min(), best_b.min(), best_a.mean(), best_b.mean(), max(un_a, un_b), un_a + un_b]
    return out


def figures(oof: np.ndarray, y: np.ndarray, eligible: np.ndarray, t: float) -> tuple[float, float, int]:
    served = eligible & (oof >= t)
    hits = int((served & (y == 1)).sum())
    return (hits / served.sum() if served.sum() else 1.0), hits / max(1, int((y == 1).sum())), int(served.sum())


def out_of_fold(x: np.ndarray, y: np.ndarray, weight: np.ndarray, rows: np.ndarray,
                settings: Settings = SETTINGS) -> np.ndarray:
    fold = np.random.default_rng(0).integers(0, FOLDS, len(rows))
    oof = np.zeros(len(y))
    for f in range(FOLDS):
        part = fit(x[rows[fold != f]], y[rows[fold != f]], weight[rows[fold != f]], settings)
        oof[rows[fold == f]] = predict(part, x[rows[fold == f]])
    return oof


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help="the public files (default: shared/data)")
    parser.add_argument("--similarities", type=Path, default=None,
                        help="a .npy of the tune pairs' cosines (as train_verifier.py writes): read if it exists")
    parser.add_argument("--examples", type=int, default=4, help="false hits shown per class")
    parser.add_argument("--token-alignment", action="store_true",
                        help="also try BERTScore-like features from the embedder's token vectors (a few minutes)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    pairs: list[Pair] = tune_pairs(args.data or shared_data_dir())
    assert all(p.split == "tune" for p in pairs)  # never a report or held-back pair
    sims = tune_similarities(pairs, args.similarities)
    threshold = L1Config().similarity_threshold
    src = np.array([source(p) for p in pairs])
    y = np.array([p.label for p in pairs], dtype=np.float64)
    vetoed = np.array([not p.same_context or veto(p.a, p.b) is not None for p in pairs])
    base = np.array([pair_features(p.a, p.b, s) for p, s in zip(pairs, sims, strict=True)])
    idf = idf_table([t for p in pairs for t in (p.a, p.b)])
    unseen = max(idf.values())
    rare = float(np.median(list(idf.values())))
    extra = np.array([extra_features(p.a, p.b, idf, unseen) for p in pairs])
    trained = ~vetoed & (sims >= FLOOR)
    rows = np.flatnonzero(trained)
    eligible = trained & (sims >= threshold)
    print(f"{len(pairs)} tune pairs, {len(rows)} reach the model; similarity threshold {threshold} "
          f"({time.monotonic() - started:.0f}s)")

    both = np.hstack([base, extra])
    deeper = Settings(trees=300, depth=4, learning_rate=0.05, min_hessian=5.0)
    settings = {
        "committed features": (base, 1.0, SETTINGS),
        "+ focus features": (both, 1.0, SETTINGS),
        "+ focus features, QQP weight 3": (both, 3.0, SETTINGS),
        "+ focus features, QQP weight 3, 300 trees of depth 4": (both, 3.0, deeper),
    }
    if args.token_alignment:
        aligned = np.hstack([both, token_alignment(pairs, rows)])
        print(f"token alignment computed ({time.monotonic() - started:.0f}s)")
        settings["+ focus features + token alignment"] = (aligned, 1.0, SETTINGS)
        settings["+ focus features + token alignment, QQP weight 3"] = (aligned, 3.0, SETTINGS)
    oofs: dict[str, np.ndarray] = {}
    grid = np.round(np.arange(0.50, 0.995, 0.01), 2)
    for name, (x, qqp_weight, trees) in settings.items():
        weight = np.where(src == "corpus", CORPUS_WEIGHT, np.where(src == "qqp", qqp_weight, 1.0))
        oof = oofs[name] = out_of_fold(x, y, weight, rows, trees)
        print(f"\n## {name} (out of fold; {time.monotonic() - started:.0f}s)")
        print("    p>=  | QQP prec  recall served | corpus prec recall | PAWS prec recall | all bars")
        best = None
        for t in grid:
            q, c, w = (figures(oof[src == s], y[src == s], eligible[src == s], t) for s in ("qqp", "corpus", "paws"))
            ok = q[0] >= 0.95 and c[0] >= 0.99 and c[1] >= 0.80 and w[0] >= 0.95
            best = best or (t if ok else None)
            if round(t * 100) % 5 == 0 or t >= 0.90 or ok:
                print(f"    {t:.2f} | {q[0]:6.1%} {q[1]:6.1%} {q[2]:5d}  | {c[0]:6.1%} {c[1]:6.1%}   "
                      f"| {w[0]:6.1%} {w[1]:6.1%}  | {'yes' if ok else 'no'}")
        print(f"  lowest probability meeting all bars: {best if best is not None else 'none'}")

    # Idea: a higher bar for questions only (QQP is all questions; much of the corpus is instructions).
    from daari.semantic.pair_model import load_pair_model

    chosen = load_pair_model().threshold
    asks = np.array([is_question(p.a) or is_question(p.b) for p in pairs])
    oof = oofs["committed features"]
    corpus = src == "corpus"
    print(f"\n## committed features, instructions at p >= {chosen}, questions at p >= t "
          f"(corpus: {int((corpus & asks & (y == 1)).sum())} of {int((corpus & (y == 1)).sum())} must-hit "
          "pairs are questions)")
    print("    t    | QQP prec  recall served | corpus prec recall | PAWS prec recall | all bars")
    for t in grid[grid >= chosen]:
        bar = np.where(asks, t, chosen)
        q, c, w = (figures(oof[src == s] - bar[src == s] + 0.5, y[src == s], eligible[src == s], 0.5)
                   for s in ("qqp", "corpus", "paws"))
        ok = q[0] >= 0.95 and c[0] >= 0.99 and c[1] >= 0.80 and w[0] >= 0.95
        if round(t * 100) % 2 == 0 or ok:
            print(f"    {t:.2f} | {q[0]:6.1%} {q[1]:6.1%} {q[2]:5d}  | {c[0]:6.1%} {c[1]:6.1%}   "
                  f"| {w[0]:6.1%} {w[1]:6.1%}  | {'yes' if ok else 'no'}")

    # The false hits of the committed setting at its committed threshold, classified.
    qqp = src == "qqp"
    false_hits = [i for i in np.flatnonzero(qqp & eligible & (oof >= chosen)) if y[i] == 0]
    served = int((qqp & eligible & (oof >= chosen)).sum())
    classes: dict[str, list[int]] = {}
    for i in false_hits:
        classes.setdefault(classify(pairs[i].a, pairs[i].b, idf, rare), []).append(i)
    print(f"\n## QQP tune false hits, committed features, out of fold at p >= {chosen}: "
          f"{len(false_hits)} of {served} served")
    for name, members in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        print(f"  {name:<20} {len(members):3d}")
        for i in members[: args.examples]:
            print(f"      {pairs[i].a.removeprefix('user: ')!r} / {pairs[i].b.removeprefix('user: ')!r}")
    strict = len(classes.get("identical_words", []))
    loose = strict + len(classes.get("same_question", []))
    hits = served - len(false_hits)
    print(f"  precision as measured {hits / max(1, served):.1%}; without the strict noise class "
          f"{hits / max(1, served - strict):.1%}; without both noise classes {hits / max(1, served - loose):.1%}")

    # Is a changed question word a signal on QQP? The share labeled duplicate, with and without one.
    yes_no = {"is", "are", "can", "could", "should", "would", "will", "do", "does", "did"}
    print("  QQP tune pairs the model is asked about (cosine >= threshold, no veto), by question word:")
    for label, keep in (("the same", lambda qa, qb: qa == qb),
                        ("yes/no vs open", lambda qa, qb: qa != qb and bool({qa, qb} & yes_no)),
                        ("open vs open", lambda qa, qb: qa != qb and not {qa, qb} & yes_no)):
        band = np.array([bool(qqp[i] and eligible[i]) and keep(question_word(p.a), question_word(p.b))
                         for i, p in enumerate(pairs)])
        print(f"    {label:<15} {int(band.sum()):4d} pairs, {y[band].mean():.0%} labeled duplicate")
    top = [i for i in np.flatnonzero(qqp & eligible & (oof >= 0.97)) if y[i] == 0]
    print(f"  the most confident false hits (p >= 0.97): {len(top)} of {int((qqp & eligible & (oof >= 0.97)).sum())}")
    for i in top:
        print(f"      {classify(pairs[i].a, pairs[i].b, idf, rare):<18} {pairs[i].a.removeprefix('user: ')!r} / "
              f"{pairs[i].b.removeprefix('user: ')!r}")

    # The ceiling: how often QQP labels "not duplicate" the pairs of each class, over the whole tune half.
    print("  all QQP tune pairs by class (served or not): pairs, labeled not duplicate")
    every = Counter((classify(p.a, p.b, idf, rare), p.label) for p in pairs if p.kind == "qqp")
    for name in sorted({k for k, _ in every}, key=lambda k: -(every[(k, 0)] + every[(k, 1)])):
        n = every[(name, 0)] + every[(name, 1)]
        print(f"    {name:<20} {n:4d}  {every[(name, 0)]:4d} ({every[(name, 0)] / n:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
