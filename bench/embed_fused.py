"""`python -m bench.embed_fused`: the embedding graph as exported, with its attention fused (what daari runs), and
with every offline fusion onnxruntime's BERT optimizer knows: time per embedding and how far the vectors move.

The three graphs are made here, in a temporary directory, from the installed model with daari's own export
(daari/semantic/minilm_onnx.py: `export_graph`, `fuse_attention`); each runs in a session as daari builds it
(`minilm_onnx.session`: every online optimization, its thread layout) through `minilm_onnx.run`. Texts of 10 to 256
word pieces at batch 1, and 8 texts at batch 8; every round runs each graph in turn (the machine is shared), medians
of wall time and of process CPU time. Vectors: each graph's against the plain graph's and against torch's over the
prompts of evals/cache/verification.jsonl and the public labeled pairs (../shared/data, when present), alone and in
padded batches of 8.

    python -m bench.embed_fused                 # 5 rounds x 20 runs per graph and case
    python -m bench.embed_fused --rounds 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.embed_speed import interleaved, text_of
from bench.report import Table, machine, print_tables
from daari.models import minilm_dir
from daari.semantic import minilm_onnx
from daari.semantic.minilm import MiniLM, load_minilm

LENGTHS = (10, 31, 64, 128, 256)
PLAIN, ATTENTION, EVERY = "as exported", "attention fused (daari)", "every offline fusion"
PAIRS = Path(__file__).resolve().parents[2] / "shared" / "data" / "qqp_tune.jsonl"


def graphs(model: MiniLM, directory: Path) -> dict[str, Path]:
    """The three graphs, written into `directory`."""
    torch_model = minilm_onnx.eager_attention(minilm_dir())
    batch = model.tokenizer(list(minilm_onnx.PROBE_TEXTS[:2]), padding=True, return_tensors="pt")
    plain = directory / "plain.onnx"
    minilm_onnx.export_graph(torch_model, batch, plain)
    heads, hidden = torch_model.config.num_attention_heads, torch_model.config.hidden_size
    attention = directory / "attention.onnx"
    shutil.copyfile(plain, attention)
    if minilm_onnx.fuse_attention(attention, heads, hidden) == 0:
        raise SystemExit("the attention was not fused (see the log)")
    every = directory / "every.onnx"
    shutil.copyfile(plain, every)
    minilm_onnx.fuse_attention(every, heads, hidden, disabled=())
    return {PLAIN: plain, ATTENTION: attention, EVERY: every}


def prompts(limit: int) -> list[str]:
    """Embed texts as L1 folds a one-turn chat: the corpus's prompts, then the public pairs' (when present)."""
    corpus = Path(__file__).resolve().parents[1] / "evals" / "cache" / "verification.jsonl"
    texts: list[str] = []
    for path in (corpus, PAIRS):
        if path.is_file():
            for line in path.read_text().splitlines():
                row = json.loads(line)
                texts += [f"user: {row[side]}" for side in ("a", "b") if isinstance(row[side], str)]
    return texts[:limit]


def agreement(model: MiniLM, sessions: dict[str, Any], texts: list[str]) -> Table:
    table = Table(f"Vectors over {len(texts)} prompts, alone and in padded batches of 8",
                  ["graph", "min cosine to the plain graph", "max |difference| to the plain graph",
                   "min cosine to torch"])
    batches = [texts[i:i + 8] for i in range(0, len(texts), 8)]
    alone = texts[:200]
    plain = [minilm_onnx.run(sessions[PLAIN], model.encode_window(b)) for b in batches]
    plain_alone = [minilm_onnx.run(sessions[PLAIN], model.encode_window([t]))[0] for t in alone]
    reference = [model.embed_torch(b) for b in batches]
    for name, onnx_session in sessions.items():
        vectors = [minilm_onnx.run(onnx_session, model.encode_window(b)) for b in batches]
        single = [minilm_onnx.run(onnx_session, model.encode_window([t]))[0] for t in alone]
        cosine = min(min(float(np.min(np.sum(v * p, axis=1))) for v, p in zip(vectors, plain, strict=True)),
                     min(float(v @ p) for v, p in zip(single, plain_alone, strict=True)))
        diff = max(max(float(np.max(np.abs(v - p))) for v, p in zip(vectors, plain, strict=True)),
                   max(float(np.max(np.abs(v - p))) for v, p in zip(single, plain_alone, strict=True)))
        to_torch = min(float(np.min(np.sum(v * r, axis=1))) for v, r in zip(vectors, reference, strict=True))
        table.add(name, f"{cosine:.7f}", f"{diff:.2e}", f"{to_torch:.7f}")
    return table


def timing(model: MiniLM, sessions: dict[str, Any], rounds: int, reps: int) -> Table:
    texts = {n: text_of(model.tokenizer, n) for n in LENGTHS}
    cases = [(f"{n} pieces x1", [texts[n]]) for n in LENGTHS]
    cases.append(("31 pieces x8", [texts[31]] + [texts[31][: -3 * i] for i in range(1, 8)]))
    encoded = [(case, model.encode_window(batch)) for case, batch in cases]
    runs = {name: partial(minilm_onnx.run, onnx_session) for name, onnx_session in sessions.items()}
    wall, cpu = interleaved(encoded, runs, rounds, reps)
    names = list(sessions)
    table = Table("One embedding by graph, ms (median wall / median process CPU)",
                  ["case", *names, f"{ATTENTION} / plain (wall)", f"{EVERY} / plain (wall)"])
    for case, _ in cases:
        w = {n: statistics.median(wall[(case, n)]) * 1000 for n in names}
        c = {n: statistics.median(cpu[(case, n)]) * 1000 for n in names}
        table.add(case, *(f"{w[n]:.2f} / {c[n]:.2f}" for n in names), f"{w[ATTENTION] / w[PLAIN]:.3f}x",
                  f"{w[EVERY] / w[PLAIN]:.3f}x")
    table.notes = [f"{rounds} rounds x {reps} runs per graph and case, alternating; {machine()}; "
                   f"load average {os.getloadavg()[0]:.2f} at the end"]
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embed_fused", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--texts", type=int, default=2000, help="prompts the vectors are compared over")
    args = parser.parse_args(argv)
    model = load_minilm()
    with tempfile.TemporaryDirectory(prefix="daari-embed-fused-") as tmp:
        sessions = {name: minilm_onnx.session(path) for name, path in graphs(model, Path(tmp)).items()}
        tables = [timing(model, sessions, args.rounds, args.reps), agreement(model, sessions, prompts(args.texts))]
    print_tables(tables)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
