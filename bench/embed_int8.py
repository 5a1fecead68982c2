"""`python -m bench.embed_int8`: what int8 weights for L1's embedding model would buy and what they would cost.

daari embeds with the model's fp32 weights (daari/semantic/minilm_onnx.py: the ONNX export must give torch's
vectors, cosine >= 0.99999). This bench measures the road not taken, for the owners' decision: the same export
with its weight MatMuls (all 36 by default, `--matmuls` for fewer) quantized to int8 (onnxruntime's dynamic
quantization, one scale per output channel; the activations quantized per call), into a temporary directory,
never into daari's models directory.

1. Speed: one text of ~10, ~31 (an agent's first turn in `bench.agent_turns`), 64 and 256 word pieces, fp32 and
   int8 in alternating rounds, medians of wall time.
2. Fidelity: cosine of each int8 vector to its fp32 vector over the texts of the labeled pairs.
3. What L1 would serve: `daari eval cache`'s table (the corpus held back, the PAWS-Wiki and QQP report halves,
   the negation and antonym pairs) computed with each model's vectors, the committed pair model reading them.

    python -m bench.embed_int8                      # all three (~3 minutes on two idle cores)
    python -m bench.embed_int8 --public-limit 500   # a smaller slice of the public files
    python -m bench.embed_int8 --matmuls feed-forward   # only the 12 feed-forward MatMuls in int8
    python -m bench.embed_int8 --matmuls feed-forward-in  # only the first feed-forward MatMul of each layer (6)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import Table, machine, print_tables, ratio
from daari.eval.cache_eval import (
    DEFAULT_SET,
    PAWS_FILE,
    QQP_FILE,
    TABLE_SETS,
    Pair,
    load_pairs,
    read_paws,
    read_qqp,
    score,
    shared_data_dir,
    table,
)
from daari.semantic import minilm_onnx
from daari.semantic.minilm import MiniLM, Vectors, load_minilm

LENGTHS = (10, 31, 64, 256)
WORDS = ("the tests in parser fail after my last change so find why and fix it then run the suite again "
         "and tell me which module broke the build on the remote machine ").split()
Embedder = Callable[[list[str]], Vectors]
# Which weight MatMuls are quantized, by the node names of the export (/bert/encoder/layer.N/...).
MATMULS: dict[str, Callable[[str], bool]] = {
    "all": lambda name: True,
    "feed-forward": lambda name: "/intermediate/" in name or ("/output/dense/" in name and "/attention/" not in name),
    "feed-forward-in": lambda name: "/intermediate/" in name,
}


def quantized(fp32: Path, into: Path, matmuls: str) -> tuple[Path, int]:
    """The int8 twin of the fp32 export: the chosen weight MatMuls per output channel, activations per call.
    Returns its path and how many MatMuls were quantized."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    graph = onnx.load(str(fp32)).graph
    weights = {init.name for init in graph.initializer}
    chosen = [node.name for node in graph.node
              if node.op_type == "MatMul" and node.input[1] in weights and MATMULS[matmuls](node.name)]
    target = into / "minilm-int8.onnx"
    quantize_dynamic(str(fp32), str(target), per_channel=True, weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul"], nodes_to_quantize=chosen)
    return target, len(chosen)


def embedder(model: MiniLM, onnx_session: Any) -> Embedder:
    """`model.embed`'s path (the window, the tokenizer, mean pooling in the graph) over another session."""
    def embed(texts: list[str]) -> Vectors:
        cut = [t[:n] for t, n in zip(texts, model.seen_chars(texts), strict=True)]
        return minilm_onnx.run(onnx_session, model.encode_window(cut))
    return embed


def text_of(model: MiniLM, pieces: int) -> str:
    words: list[str] = []
    while len(model.encode_window([" ".join(words)])["input_ids"][0]) < pieces:
        words.append(WORDS[len(words) % len(WORDS)])
    return " ".join(words)


def speed(model: MiniLM, embedders: dict[str, Embedder], rounds: int, reps: int) -> Table:
    texts = {n: text_of(model, n) for n in LENGTHS}
    walls: dict[tuple[str, int], list[float]] = {(name, n): [] for name in embedders for n in LENGTHS}
    for embed in embedders.values():  # warm: the first runs allocate
        for n in LENGTHS:
            embed([texts[n]])
    for r in range(rounds):
        for name, embed in embedders.items():
            for n in LENGTHS:
                for i in range(reps):
                    text = f"{texts[n]} {r} {i}" if n < 256 else texts[n]  # a new text: no cache anywhere
                    started = time.perf_counter()
                    embed([text])
                    walls[(name, n)].append(time.perf_counter() - started)
    table = Table("One embedding, wall ms (median; fp32 and int8 in alternating rounds)",
                  ["word pieces", "fp32 ms", "int8 ms", "int8 / fp32"])
    for n in LENGTHS:
        fp32, int8 = (statistics.median(walls[(name, n)]) * 1000 for name in ("fp32", "int8"))
        table.add(n, fp32, int8, ratio(int8, fp32))
    return table


def fidelity(texts: list[str], embedders: dict[str, Embedder]) -> Table:
    fp32, int8 = (np.concatenate([e(texts[i:i + 64]) for i in range(0, len(texts), 64)])
                  for e in (embedders["fp32"], embedders["int8"]))
    cosine = np.sum(fp32 * int8, axis=1)
    table = Table(f"int8 vector against its fp32 vector, cosine ({len(texts)} texts of the labeled pairs)",
                  ["min", "1st percentile", "median", "daari's bar for the ONNX export"])
    table.add(f"{cosine.min():.4f}", f"{np.percentile(cosine, 1):.4f}", f"{np.median(cosine):.5f}",
              f">= {minilm_onnx.MIN_COSINE}")
    return table


def served(pairs: list[Pair], embedders: dict[str, Embedder], threshold: float) -> Table:
    modes = ["none", "lexical", "pair_model"]
    rows = {name: table(score(pairs, embed, modes, None, threshold), modes, threshold, TABLE_SETS)
            for name, embed in embedders.items()}
    out = Table(f"What L1 would serve (daari eval cache's sets, threshold {threshold:.2f})",
                ["set", "verify", "fp32: precision / recall", "fp32: served (wrong)", "int8: precision / recall",
                 "int8: served (wrong)"])
    for fp32, int8 in zip(rows["fp32"], rows["int8"], strict=True):
        out.add(fp32["title"], fp32["mode"], f"{fp32['precision']:.1%} / {fp32['recall']:.1%}",
                f"{fp32['served']} ({fp32['false_hits']})", f"{int8['precision']:.1%} / {int8['recall']:.1%}",
                f"{int8['served']} ({int8['false_hits']})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embed_int8", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--public-limit", type=int, default=None,
                        help="at most N pairs of each public file's report half (default: all)")
    parser.add_argument("--threshold", type=float, default=None, help="default: cache.l1.similarity_threshold")
    parser.add_argument("--matmuls", choices=sorted(MATMULS), default="all",
                        help="which weight MatMuls are quantized (default: all 36)")
    args = parser.parse_args(argv)
    from daari.config import L1Config

    threshold = args.threshold if args.threshold is not None else L1Config().similarity_threshold
    model = load_minilm()
    if model.session is None:
        print("bench.embed_int8: daari runs torch here (no ONNX export), nothing to quantize")
        return 1
    fp32_path = Path(model.session._model_path)  # the export daari loaded, read only
    with tempfile.TemporaryDirectory(prefix="daari-int8-") as tmp:
        int8_path, count = quantized(fp32_path, Path(tmp), args.matmuls)
        int8_session = minilm_onnx.session(int8_path)
        embedders = {"fp32": model.embed, "int8": embedder(model, int8_session)}
        pairs = load_pairs(DEFAULT_SET, model.seen_chars)
        data = shared_data_dir()
        for reader, file in ((read_paws, PAWS_FILE), (read_qqp, QQP_FILE)):
            if (data / file).exists():
                pairs += [p for p in reader(data / file) if p.split == "report"][: args.public_limit]
        tables = [speed(model, embedders, args.rounds, args.reps),
                  fidelity(sorted({t for p in pairs[:2000] for t in (p.a, p.b)}), embedders),
                  served(pairs, embedders, threshold)]
    print_tables(tables, [machine(), f"fp32: {fp32_path.name}; int8: onnxruntime quantize_dynamic, per output "
                                     f"channel, {count} weight MatMuls ({args.matmuls})"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
