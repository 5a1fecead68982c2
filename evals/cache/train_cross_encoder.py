"""Train the cross-encoder (daari/semantic/cross_encoder.py) on the tune halves; measure it out of fold.

    python evals/cache/train_cross_encoder.py [--similarities FILE.npy] [--states FILE.pt] [--folds 0,1,2,3,4]
                                              [--epochs N] [--qqp-weight W] [--oof FILE.npy] [--write FILE.npz]
    python evals/cache/train_cross_encoder.py --scores FILE.npy     # compare saved out-of-fold scores only
    python evals/cache/train_cross_encoder.py --latency             # one forward against one embedding

Reads ONLY what evals/cache/train_verifier.py trains on: the corpus's "split": "tune" pairs, PAWS-Wiki odd
ids and QQP odd line numbers (1-based); never a held-back corpus pair, an even PAWS id or an even QQP line.
The same rows as the pair model (no veto, same lookup context, cosine >= FLOOR) and the same 5 folds
(seeded). For each fold asked for, the adapters are trained on the other folds and score the fold; the
out-of-fold scores are compared with the pair model's trees (fitted on the same folds) on the QQP tune half,
beside the corpus tune and PAWS tune bars, for the cross-encoder alone, and as one more feature of the trees.
The lower layers are frozen, so their output is computed once per pair and only the top layers train.
Measured: it does not rank QQP better than the trees (docs/caching.md, "A cross-encoder, measured"), so no
verify mode uses it and no weights are committed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import cross_encoder as ce  # noqa: E402
from boosting import fit, predict  # noqa: E402
from qqp_frontier import classify, idf_table  # noqa: E402
from train_verifier import (  # noqa: E402
    CORPUS_WEIGHT,
    FLOOR,
    FOLDS,
    SETTINGS,
    source,
    tune_pairs,
    tune_similarities,
)

from daari.config import L1Config  # noqa: E402
from daari.eval.cache_eval import Pair, shared_data_dir  # noqa: E402
from daari.semantic.pair_features import pair_features, veto  # noqa: E402

SEED = 0
BATCH = 32
LEARNING_RATE = 2e-3


def fresh_model() -> tuple[object, object]:
    """A new base model (never the embedder's, which the adapters would change) with adapters added."""
    import torch
    import transformers

    from daari.models import minilm_dir

    torch.manual_seed(SEED)
    directory = str(minilm_dir())
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    base = transformers.AutoModel.from_pretrained(directory, attn_implementation="eager")
    base.eval()
    return tokenizer, ce.build(base)


def lower_states(model: object, tokenizer: object, texts: list[tuple[str, str]]) -> list[tuple[object, object]]:
    """Per pair, the hidden states entering the top layers (T x H, fp32) and the mask, unpadded."""
    import torch

    out = []
    base = model.base  # type: ignore[attr-defined]
    for i in range(0, len(texts), 64):
        chunk = texts[i:i + 64]
        batch = tokenizer([a for a, _ in chunk], [b for _, b in chunk], padding=True,  # type: ignore[operator]
                          truncation=True, max_length=ce.MAX_TOKENS, return_tensors="pt")
        with torch.inference_mode():
            hs = base(**batch, output_hidden_states=True).hidden_states[model.first_top]  # type: ignore[attr-defined]
        for j in range(len(chunk)):
            n = int(batch["attention_mask"][j].sum())
            out.append((hs[j, :n].clone(), n))
    return out


def collate(states: list[tuple[object, object]], idx: np.ndarray) -> tuple[object, object]:
    import torch

    longest = max(int(states[i][1]) for i in idx)  # type: ignore[call-overload]
    h = torch.zeros(len(idx), longest, states[idx[0]][0].shape[1])  # type: ignore[attr-defined]
    m = torch.zeros(len(idx), longest)
    for k, i in enumerate(idx):
        n = int(states[i][1])  # type: ignore[call-overload]
        h[k, :n] = states[i][0]  # type: ignore[index]
        m[k, :n] = 1
    return h, m


def train_top(model: object, states: list[tuple[object, object]], y: np.ndarray, w: np.ndarray, rows: np.ndarray,
              epochs: int, after_epoch: Callable[[int], None] | None = None) -> None:
    """Adapters and head from the same seeded start, `epochs` passes over `rows`; `after_epoch` sees each end."""
    import torch

    params = list(ce.trainable(model).values())
    for p in params:  # the same start for every fold
        if p.dim() == 2 and p.shape[0] == ce.RANK:
            torch.nn.init.normal_(p, std=1 / np.sqrt(p.shape[1]))
        else:
            torch.nn.init.zeros_(p)
    opt = torch.optim.AdamW(params, lr=LEARNING_RATE, weight_decay=0.01)
    rng = np.random.default_rng(SEED)
    steps = epochs * ((len(rows) + BATCH - 1) // BATCH)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LEARNING_RATE, total_steps=steps, pct_start=0.1)
    model.train()  # type: ignore[attr-defined]
    for epoch in range(epochs):
        order = rng.permutation(rows)
        for s in range(0, len(order), BATCH):
            idx = order[s:s + BATCH]
            h, m = collate(states, idx)
            logits = model.top(h, m)  # type: ignore[attr-defined]
            target = torch.tensor(y[idx], dtype=torch.float32)
            weight = torch.tensor(w[idx], dtype=torch.float32)
            loss = (torch.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
                    * weight).sum() / weight.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        if after_epoch is not None:
            model.eval()  # type: ignore[attr-defined]
            after_epoch(epoch)
            model.train()  # type: ignore[attr-defined]
    model.eval()  # type: ignore[attr-defined]


def score_top(model: object, states: list[tuple[object, object]], rows: np.ndarray) -> np.ndarray:
    import torch

    out = np.zeros(len(rows))
    with torch.inference_mode():
        for s in range(0, len(rows), 128):
            idx = rows[s:s + 128]
            h, m = collate(states, idx)
            out[s:s + len(idx)] = model.top(h, m).numpy()  # type: ignore[attr-defined]
    return out


def figures(scores: np.ndarray, y: np.ndarray, eligible: np.ndarray, t: float) -> tuple[float, float, int]:
    served = eligible & (scores >= t)
    hits = int((served & (y == 1)).sum())
    n = int(served.sum())
    return (hits / n if n else 1.0), hits / max(1, int((y == 1).sum())), n  # recall of every must-hit pair


def report(name: str, p: np.ndarray, y: np.ndarray, src: np.ndarray, eligible: np.ndarray,
           scope: np.ndarray) -> float | None:
    """The QQP tune frontier where corpus tune keeps >= 99% / 80% and PAWS tune >= 95%, and QQP's best at any bar
    (with at least 10% recall), over the pairs in `scope` (the folds scored)."""
    best_bars, best_any = None, None
    for t in np.unique(np.round(p[scope & eligible], 3)):
        f = {s: figures(p[scope & (src == s)], y[scope & (src == s)], eligible[scope & (src == s)], t)
             for s in ("corpus", "paws", "qqp")}
        if f["qqp"][1] >= 0.10 and (best_any is None or f["qqp"][0] > best_any[1]["qqp"][0]):
            best_any = (t, f)
        if f["corpus"][0] >= 0.99 and f["corpus"][1] >= 0.80 and f["paws"][0] >= 0.95 and (
                best_bars is None or f["qqp"][0] > best_bars[1]["qqp"][0]):
            best_bars = (t, f)
    def line(x: tuple[float, dict[str, tuple[float, float, int]]] | None) -> str:
        if x is None:
            return "none"
        t, f = x
        return (f"p>={t:.3f}: QQP {f['qqp'][0]:.1%} (recall {f['qqp'][1]:.1%}, {f['qqp'][2]} served); "
                f"corpus {f['corpus'][0]:.1%}/{f['corpus'][1]:.1%}; PAWS {f['paws'][0]:.1%}/{f['paws'][1]:.1%}")
    print(f"{name:<28} with bars: {line(best_bars)}")
    print(f"{'':<28} any bar:   {line(best_any)}")
    return None if best_bars is None else float(best_bars[0])


def false_hit_classes(pairs: list[Pair], bars: dict[str, tuple[np.ndarray, float | None]], y: np.ndarray,
                      src: np.ndarray, eligible: np.ndarray) -> None:
    """QQP tune false hits of each setting at its best bar, by evals/cache/qqp_frontier.py's classes."""
    idf = idf_table([t for p in pairs for t in (p.a, p.b)])
    rare = float(np.median(list(idf.values())))
    names = list(bars)
    print("QQP tune false hits / served at each setting's bar (corpus and PAWS bars held), by class:")
    counts: dict[str, Counter[str]] = {}
    for name, (scores, t) in bars.items():
        if t is None:
            continue
        served = (src == "qqp") & eligible & (scores >= t)
        counts[name] = Counter(classify(pairs[i].a, pairs[i].b, idf, rare) for i in np.flatnonzero(served & (y == 0)))
        print(f"  {name:<24} p>={t:.3f}: {sum(counts[name].values())} false of {int(served.sum())} served")
    for cls in sorted({c for k in counts.values() for c in k}):
        print(f"    {cls:<20} " + "  ".join(f"{counts[n][cls]:3d}" for n in names if n in counts))


def latency(rounds: int = 2) -> None:
    """p50 of one cross-encoder forward over a pair beside one embedding of one prompt, in the same loop, on the
    corpus's held-back one-turn pairs (their texts only, as bench/verifier.py times them; no label is read)."""
    import statistics

    import torch

    from daari.eval.cache_eval import DEFAULT_SET, load_pairs
    from daari.semantic.minilm import load_minilm

    embedder = load_minilm()
    pairs = [p for p in load_pairs(DEFAULT_SET, embedder.seen_chars) if p.split == "heldout" and p.same_context]
    tokenizer, model = fresh_model()
    one, pair = [], []
    for _ in range(rounds):
        for p in pairs:
            t = time.perf_counter()
            embedder.embed([p.a])
            one.append(time.perf_counter() - t)
            t = time.perf_counter()
            with torch.inference_mode():
                model(**tokenizer(p.a, p.b, truncation=True, max_length=ce.MAX_TOKENS,  # type: ignore[operator]
                                  return_tensors="pt"))
            pair.append(time.perf_counter() - t)
    e, c = statistics.median(one) * 1000, statistics.median(pair) * 1000
    print(f"{len(one)} timings: one embedding p50 {e:.1f} ms, cross-encoder over the pair p50 {c:.1f} ms "
          f"({c / e:.2f}x)")


def equal_served(scores: dict[str, np.ndarray], y: np.ndarray, qqp: np.ndarray, eligible: np.ndarray) -> None:
    """QQP tune precision of each setting when each serves its N most confident pairs: the ranking compared at
    equal recall, whatever bar the corpus and PAWS allow."""
    print("QQP tune precision at equal served counts (each setting's N most confident QQP pairs):")
    names = list(scores)
    print(f"  {'served':>6}  " + "  ".join(f"{n[:22]:>22}" for n in names))
    for n in (50, 75, 100, 150, 200, 275, 350):
        cells = []
        for name in names:
            rows = np.flatnonzero(qqp & eligible)
            top = rows[np.argsort(-scores[name][rows], kind="stable")[:n]]
            cells.append(f"{y[top].mean():22.1%}")
        print(f"  {n:6d}  " + "  ".join(cells))


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--similarities", type=Path, default=None)
    parser.add_argument("--folds", default="0,1,2,3,4", help="the folds to score (a quick check: 0)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--qqp-weight", type=float, default=1.0)
    parser.add_argument("--oof", type=Path, default=None, help="write the out-of-fold log-odds here (.npy)")
    parser.add_argument("--states", type=Path, default=None,
                        help="a file of the lower layers' output: read if it exists, else computed and written there")
    parser.add_argument("--scores", type=Path, default=None,
                        help="the out-of-fold log-odds an earlier run wrote (--oof): compare without training")
    parser.add_argument("--write", type=Path, default=None, help="then train on all tune rows, write the weights here")
    parser.add_argument("--latency", action="store_true", help="only time one forward against one embedding")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    if args.latency:
        latency()
        return 0
    started = time.monotonic()
    pairs = tune_pairs(args.data or shared_data_dir())
    sims = tune_similarities(pairs, args.similarities)
    src = np.array([source(p) for p in pairs])
    y = np.array([p.label for p in pairs], dtype=np.float64)
    vetoed = np.array([not p.same_context or veto(p.a, p.b) is not None for p in pairs])
    trained = ~vetoed & (sims >= FLOOR)
    eligible = trained & (sims >= L1Config().similarity_threshold)
    weight = np.where(src == "corpus", CORPUS_WEIGHT, np.where(src == "qqp", args.qqp_weight, 1.0))
    rows = np.flatnonzero(trained)
    fold_of = np.full(len(pairs), -1)
    fold_of[rows] = np.random.default_rng(0).integers(0, FOLDS, len(rows))  # the training script's folds
    x = np.array([pair_features(p.a, p.b, s) for p, s in zip(pairs, sims, strict=True)])
    folds = [int(f) for f in args.folds.split(",")]
    tokenizer, model = fresh_model()
    states: list[tuple[object, object]] = [(None, 0)] * len(pairs)
    if args.scores is not None:  # an earlier run's out-of-fold log-odds: compare only
        oof = np.load(args.scores)
        assert len(oof) == len(pairs), "the scores are of another set of pairs"
        folds = list(range(FOLDS))
    else:
        if args.states is not None and args.states.exists():
            lower = torch.load(args.states)
        else:
            lower = lower_states(model, tokenizer, [(pairs[i].a, pairs[i].b) for i in rows])
            if args.states is not None:
                torch.save(lower, args.states)
        for i, s in zip(rows, lower, strict=True):
            states[i] = s
        print(f"{len(rows)} rows, lower layers run once ({time.monotonic() - started:.0f}s)", flush=True)
        oof = np.full(len(pairs), -50.0)
        for f in folds:
            train_rows, test_rows = rows[fold_of[rows] != f], rows[fold_of[rows] == f]
            def progress(epoch: int, test_rows: np.ndarray = test_rows, f: int = f) -> None:
                oof[test_rows] = score_top(model, states, test_rows)
                p = 1 / (1 + np.exp(-oof))
                report(f"fold {f} epoch {epoch + 1}", p, y, src, eligible, fold_of == f)
                print(f"  ({time.monotonic() - started:.0f}s)", flush=True)
            train_top(model, states, y, weight, train_rows, args.epochs, progress if len(folds) == 1 else None)
            oof[test_rows] = score_top(model, states, test_rows)
            print(f"fold {f} done ({time.monotonic() - started:.0f}s)", flush=True)
    tw = np.where(src == "corpus", CORPUS_WEIGHT, 1.0)  # the trees as train_verifier.py weighs them
    trees_oof = np.zeros(len(pairs))
    for f in folds:
        tr, te = rows[fold_of[rows] != f], rows[fold_of[rows] == f]
        trees_oof[te] = predict(fit(x[tr], y[tr], tw[tr], SETTINGS), x[te])
    scope = np.isin(fold_of, folds)
    prob = 1 / (1 + np.exp(-oof))
    bars = {"pair_model trees (24)": (trees_oof, report("pair_model trees (24)", trees_oof, y, src, eligible, scope))}
    report("cross-encoder alone", prob, y, src, eligible, scope)
    mean = (prob + trees_oof) / 2
    bars["mean of the two"] = (mean, report("mean of the two", mean, y, src, eligible, scope))
    report("min of the two", np.minimum(prob, trees_oof), y, src, eligible, scope)
    if len(folds) == FOLDS:  # the cross-encoder's out-of-fold score as a 25th feature of the trees
        x2 = np.column_stack([x, oof])
        stacked = np.zeros(len(pairs))
        for f in range(FOLDS):
            tr, te = rows[fold_of[rows] != f], rows[fold_of[rows] == f]
            stacked[te] = predict(fit(x2[tr], y[tr], tw[tr], SETTINGS), x2[te])
        bars["trees + cross-encoder"] = (stacked, report("trees + cross-encoder", stacked, y, src, eligible, scope))
        false_hit_classes(pairs, bars, y, src, eligible)
        equal_served({"pair_model trees (24)": trees_oof, "mean of the two": mean, "trees + cross-encoder": stacked,
                      "cross-encoder alone": prob}, y, src == "qqp", eligible)
    if args.oof:
        np.save(args.oof, oof)
    if args.write:
        train_top(model, states, y, weight, rows, args.epochs)
        ce.save(model, args.write, {"trained_on": "verification.jsonl split=tune, PAWS-Wiki odd ids, QQP odd lines",
                                    "epochs": args.epochs, "qqp_weight": args.qqp_weight, "seed": SEED})
        print(f"wrote {args.write} ({args.write.stat().st_size // 1024} KB)")
    print(f"{time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
