"""`python -m bench.embed_speed`: one MiniLM embedding (L1's probe on an agent's first turn), by runtime.

Candidates, each giving the same vectors (cosine to the torch path printed; the bar is >= 0.99999):
- torch: transformers as daari ran it before (the default attention, sdpa); `torch-eager`: eager attention;
- torch-jit: the model with daari's pooling traced, frozen and `optimize_for_inference`;
- onnx: onnxruntime over the ONNX export (daari/semantic/minilm_onnx.py), what daari now runs.
Texts of ~10, ~64 and 256 word pieces, batch 1 and 8. Each round runs every candidate in turn (the machine is
shared: alternating spreads the load over all of them); the table has medians over all rounds of wall time and
of process CPU time (every thread's, spinning included). `tokenizer` is the fast tokenizer's share. Then
`seen_chars` on long user turns (the whole text tokenized, as before, vs the prefix). `--load` starts a fresh
process per path and reports its load time and RSS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import Table, machine, print_tables, ratio

WORDS = ("how do I undo the last git commit but keep my changes staged for the next one while the build "
         "of the docker image runs on a remote machine with python and rust code in it ").split()
LENGTHS = (10, 64, 256)


def text_of(tokenizer: Any, tokens: int) -> str:
    """A text of `tokens` word pieces with [CLS] and [SEP] (256: a longer text, cut at the model's window)."""
    words: list[str] = []
    while len(tokenizer(" ".join(words))["input_ids"]) < tokens:
        words.append(WORDS[len(words) % len(WORDS)])
    return " ".join(words if tokens < 256 else words * 2)


def candidates(data_dir: str) -> tuple[Any, dict[str, Callable[[list[str]], Any]]]:
    import torch
    import transformers

    from daari.models import minilm_dir
    from daari.semantic.minilm import MAX_TOKENS, load_minilm

    model = load_minilm(data_dir)
    if model.session is None:
        raise SystemExit("the ONNX path did not load (see the log above)")
    directory = str(minilm_dir())
    eager = transformers.AutoModel.from_pretrained(directory, attn_implementation="eager").eval()

    def with_model(bert: Any) -> Callable[[list[str]], Any]:
        def embed(texts: list[str]) -> Any:
            batch = model.tokenizer(texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
            with torch.inference_mode():
                hidden = bert(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()
        return embed

    class Hidden(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    example = model.tokenizer(["a padded example", "a longer padded example of text"], padding=True,
                              return_tensors="pt")
    with torch.inference_mode():
        traced = torch.jit.trace(Hidden(eager).eval(), (example["input_ids"], example["attention_mask"],
                                                        example["token_type_ids"]), strict=False)
    frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))

    class JitOutput:
        def __init__(self, hidden: Any) -> None:
            self.last_hidden_state = hidden

    def jit(**batch: Any) -> JitOutput:
        return JitOutput(frozen(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]))

    from daari.semantic import minilm_onnx

    spinning = minilm_onnx.session(next(Path(data_dir).rglob("*.onnx")), torch.get_num_threads(), spin=True)

    def onnx_spinning(texts: list[str]) -> Any:
        return minilm_onnx.run(spinning, model.encode_window(texts))

    return model, {"torch": model.embed_torch, "torch-eager": with_model(eager), "torch-jit": with_model(jit),
                   "onnx": model.embed, "onnx-spin": onnx_spinning,
                   "tokenizer": model.encode_window}


Timings = dict[tuple[str, str], list[float]]  # (case, candidate) -> seconds, one per run


def interleaved(cases: list[tuple[str, Any]], candidates: dict[str, Callable[[Any], object]], rounds: int,
                reps: int) -> tuple[Timings, Timings]:
    """Wall and process CPU seconds of every candidate on every case's input, `reps` runs at a time, each round
    running all of them in turn (the machine is shared: alternating spreads its load over every candidate)."""
    wall: Timings = {}
    cpu: Timings = {}
    for _ in range(rounds):
        for case, given in cases:
            for name, run in candidates.items():
                for _ in range(reps):
                    w, c = time.perf_counter(), time.process_time()
                    run(given)
                    cpu.setdefault((case, name), []).append(time.process_time() - c)
                    wall.setdefault((case, name), []).append(time.perf_counter() - w)
    return wall, cpu


def measure(data_dir: str, rounds: int, reps: int, only: list[str]) -> list[Table]:
    import torch

    model, paths = candidates(data_dir)
    paths = {name: embed for name, embed in paths.items() if not only or name in only or name == "torch"}
    if "onnx" not in paths:
        raise SystemExit("--paths must name onnx (the tables compare torch with it)")
    texts = {n: text_of(model.tokenizer, n) for n in LENGTHS}
    cases = [(f"{n} x{b}", [texts[n]] * b if b == 1 else [texts[n]] + [texts[n][: -3 * i] for i in range(1, b)])
             for b in (1, 8) for n in LENGTHS]
    reference = {case: paths["torch"](batch) for case, batch in cases}
    cosines = {name: min(float(np.min(np.sum(np.asarray(paths[name](batch)) * reference[case], axis=1)))
                         for case, batch in cases) for name in paths if name != "tokenizer"}
    wall, cpu = interleaved(cases, paths, rounds, reps)
    names = list(paths)
    table = Table(f"One embedding by runtime, ms (median wall / median process CPU), {torch.get_num_threads()} "
                  "threads", ["case", *names, "torch / onnx (wall)", "torch / onnx (CPU)"])
    for case, _ in cases:
        w = {n: statistics.median(wall[(case, n)]) * 1000 for n in names}
        c = {n: statistics.median(cpu[(case, n)]) * 1000 for n in names}
        table.add(case, *(f"{w[n]:.2f} / {c[n]:.2f}" for n in names), ratio(w["torch"], w["onnx"]),
                  ratio(c["torch"], c["onnx"]))
    table.notes = ["min cosine to the torch vectors over these cases: "
                   + ", ".join(f"{n} {v:.7f}" for n, v in cosines.items()),
                   f"{rounds} rounds x {reps} reps per candidate and case, alternating; {machine()}; "
                   f"load average {os.getloadavg()[0]:.2f} at the end"]
    return [table]


def measure_seen_chars(reps: int) -> list[Table]:
    """Where a long user turn's first 254 word pieces end: the whole text tokenized (before) vs the prefix."""
    from daari.semantic.minilm import MAX_TOKENS, load_minilm

    model = load_minilm()

    def whole_text(text: str) -> int:
        offsets = model.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        return len(text) if len(offsets) <= MAX_TOKENS - 2 else int(offsets[MAX_TOKENS - 3][1])

    line = "def parse(self, body): return json.loads(body)  # the user's pasted code and words, more of it\n"
    table = Table("seen_chars on a long user turn, ms of CPU (best of the reps)",
                  ["text", "whole text tokenized (before)", "prefix (now)", "before / now"])
    for size in (1_000, 8_000, 30_000, 110_000):
        text = (line * (size // len(line) + 1))[:size]
        best: dict[str, float] = {}
        for name, cut in (("whole", whole_text), ("prefix", lambda t: model.seen_chars([t])[0])):
            for _ in range(reps):
                started = time.process_time()
                cut(text)
                best[name] = min(best.get(name, float("inf")), time.process_time() - started)
        table.add(f"{size:,} chars", best["whole"] * 1000, best["prefix"] * 1000, ratio(best["whole"], best["prefix"]))
    return [table]


def load_child(path: str, data_dir: str) -> None:
    """In a fresh process: load one path, embed once, print load seconds, first-embedding ms and RSS (MB)."""
    from daari.semantic import minilm

    started = time.perf_counter()
    model = minilm.load_minilm(data_dir, use_onnx=path == "onnx")
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    model.embed(["user: How do I list Docker containers?"])
    first = time.perf_counter() - started
    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    print(f"{loaded:.3f} {first * 1000:.1f} {rss:.0f} {model.session is not None}")


def measure_load(data_dir: str, rounds: int) -> list[Table]:
    results: dict[str, list[list[float]]] = {"torch": [], "onnx": []}
    for _ in range(rounds):
        for path in results:
            out = subprocess.run([sys.executable, "-m", "bench.embed_speed", "--load-child", path,
                                  "--data-dir", data_dir], check=True, capture_output=True, text=True).stdout
            loaded, first, rss, onnx = out.split()
            if (onnx == "True") != (path == "onnx"):
                raise SystemExit(f"{path}: the wrong path loaded")
            results[path].append([float(loaded), float(first), float(rss)])
    table = Table("Loading the embedding model (a fresh process each, the .onnx file already exported)",
                  ["path", "load s (median)", "first embedding ms", "RSS MB"])
    for path, rows in results.items():
        table.add(path, *(statistics.median(r[i] for r in rows) for i in range(3)))
    return [table]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.embed_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch and onnxruntime threads (0: torch's default)")
    parser.add_argument("--paths", default="", help="the candidates to time, comma-separated (default: all)")
    parser.add_argument("--load", action="store_true", help="also time loading, in fresh processes")
    parser.add_argument("--data-dir", default=None, help="where the .onnx file is kept (default: a temporary dir)")
    parser.add_argument("--load-child", choices=("torch", "onnx"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as daari sets it before torch is imported
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.load_child:
        load_child(args.load_child, args.data_dir)
        return
    with tempfile.TemporaryDirectory(prefix="daari-embed-") as scratch:
        data_dir = args.data_dir or scratch
        tables = measure(data_dir, args.rounds, args.reps, [p for p in args.paths.split(",") if p])
        tables += measure_seen_chars(max(5, args.reps))
        if args.load:
            tables += measure_load(data_dir, max(3, args.rounds // 3))
    print_tables(tables)


if __name__ == "__main__":
    main()
