"""all-MiniLM-L6-v2 under onnxruntime: the same fp32 weights as the torch model, a cheaper forward pass.

The graph (BERT, then the mean pooling and L2 norm daari applies) is exported once from the installed
package's files with torch's exporter, no network, into `models_dir(data_dir)`: named by a hash of the model
files, the exporter (torch) version and EXPORT_FORMAT, so a new model or torch writes a new file; written to a
private temporary name and renamed (a crash or a second process never leaves half a file under the final
name). Before the rename each layer's attention is fused into one onnxruntime `Attention` operator
(`fuse_attention`: ~10% less time for a short text, the same vectors to float rounding); a graph the fusion cannot
read stays as exported. A file that does not load is exported again. Each load checks the session's vectors of
PROBE_TEXTS against torch's, computed at export and kept beside the file (cosine >= MIN_COSINE), so a load needs
no torch; any failure (no onnxruntime or onnx, an export error, a mismatch) returns None and daari embeds with
torch.
Measured: docs/performance.md, "The embedding on an agent's first turn" and "The attention fused".
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from daari.datadir import private_dir, write_atomically
from daari.semantic.onnx_threads import caller_pinned, process_layout

log = logging.getLogger("daari.l1")

EXPORT_FORMAT = 4  # bump when the exported graph changes (its inputs, outputs, the pooling or the fusions in it)
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
MIN_COSINE = 0.99999  # to the torch vectors: cached vectors and the verifier's cosine feature must not move
# The offline optimizer's other fusions, left to the session's own optimizer (ORT_ENABLE_ALL, in `session`): with
# them the graph is no faster than with the attention alone at short texts and slower at 128-256 word pieces
# (bench/embed_fused.py).
SESSION_FUSIONS = ("--disable_skip_layer_norm", "--disable_embed_layer_norm", "--disable_bias_gelu",
                   "--disable_gelu", "--disable_layer_norm", "--disable_bias_skip_layer_norm")
FUSE_TIMEOUT_S = 300.0  # the fusion takes a second or two; a child stuck past this leaves the plain graph
# a short text, a padded batch and a text cut at the model's 256 word pieces
PROBE_TEXTS = ("user: How do I list Docker containers?",
               "user: undo the last git commit but keep the changes " * 3,
               "assistant: " + "the quick brown fox jumps over the lazy dog, then naps; " * 40)

Vectors = npt.NDArray[np.float32]


def model_key(model_dir: Path) -> str:
    """What the exported file depends on: the weights and config, the exporter's version, EXPORT_FORMAT."""
    digest = hashlib.sha256(f"{EXPORT_FORMAT}\0torch {importlib.metadata.version('torch')}\0".encode())
    for name in ("config.json", "model.safetensors"):
        with open(model_dir / name, "rb") as f:
            digest.update(name.encode() + b"\0" + hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()[:16]


def mean_pooled(hidden: Any, attention_mask: Any) -> Any:
    """daari's vector of a text (torch tensors in, out): the mean of the last hidden state over its real tokens,
    L2-normalized. The torch path runs it; the export traces it into the graph."""
    import torch

    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def export(model: Any, tokenizer: Any, target: Path, probe: Path, probe_vectors: Vectors) -> None:
    """The torch model with daari's pooling as one ONNX graph (dynamic batch and length), and torch's vectors of
    PROBE_TEXTS beside it (what each later load checks the session against, without torch); both written
    atomically, the vectors first (an .onnx file never lacks them)."""
    write_atomically(probe, lambda path: np.save(path, probe_vectors, allow_pickle=False))
    # The example batch is padded, so the attention mask is traced as a real input, never folded away.
    batch = tokenizer(list(PROBE_TEXTS[:2]), padding=True, return_tensors="pt")
    heads, hidden = model.config.num_attention_heads, model.config.hidden_size

    def write(path: Path) -> None:
        export_graph(model, batch, path)
        fuse_attention(path, heads, hidden)

    write_atomically(target, write)


def export_graph(model: Any, batch: Any, path: Path) -> None:
    """The model with daari's pooling as an ONNX graph at `path`, traced on `batch` (the tokenizer's tensors)."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            return mean_pooled(hidden, attention_mask)

    # The TorchScript exporter (dynamo=False): seconds, and needs `onnx` but not onnxscript. Its tracer
    # warnings (Python conditions taken as constants) are checked away by the vectors in `load_session`.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Pooled(model).eval(), tuple(batch[name] for name in INPUTS), str(path),
                          input_names=list(INPUTS), output_names=["vectors"], opset_version=17, dynamo=False,
                          dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in INPUTS},
                                        "vectors": {0: "batch"}})


def fuse_attention(path: Path, heads: int, hidden: int, disabled: tuple[str, ...] = SESSION_FUSIONS) -> int:
    """Rewrite the graph at `path` with each layer's attention (the Q, K and V projections, the scores, the mask,
    the softmax, the weighted sum) as one onnxruntime `Attention` operator; how many were fused. onnxruntime's
    offline optimizer for BERT graphs (shipped with it) runs in a child process: importing it puts its directory
    on `sys.path` and logs each fusion, neither of which belongs in the server. A graph it cannot read or fuse is
    left as it was: the fusion only makes the embedding cheaper, and `load_session` checks the vectors either way.
    `disabled`: the optimizer's flags for the fusions it leaves out (the bench passes none, for every fusion)."""
    fused = path.with_name(path.name + ".fused.onnx")
    try:
        # opt_level 0: the pattern fusions only; the session's own optimizer runs on top at every load.
        subprocess.run([sys.executable, "-m", "onnxruntime.transformers.optimizer", "--input", str(path),
                        "--output", str(fused), "--model_type", "bert", "--num_heads", str(heads),
                        "--hidden_size", str(hidden), "--opt_level", "0", *disabled],
                       check=True, capture_output=True, timeout=FUSE_TIMEOUT_S)
        count = attention_operators(fused)
        if count:
            os.replace(fused, path)
        return count
    except (OSError, subprocess.SubprocessError, ValueError) as exc:  # the plain graph: same vectors, a bit slower
        detail = exc.stderr.decode(errors="replace")[-300:] if isinstance(exc, subprocess.CalledProcessError) else exc
        log.info("L1: the embedding model's attention was not fused (%s: %s)", type(exc).__name__, detail)
        return 0
    finally:
        fused.unlink(missing_ok=True)


def attention_operators(path: Path) -> int:
    """How many fused `Attention` operators the ONNX graph at `path` holds."""
    import onnx

    return sum(1 for node in onnx.load(str(path), load_external_data=False).graph.node if node.op_type == "Attention")


def eager_attention(model_dir: Path) -> Any:
    """The model with eager attention, to export: onnxruntime runs its graph ~10% cheaper than the one traced
    through torch's sdpa (bench/embed_speed.py's notes), and its mask is an explicit input either way."""
    import transformers

    return transformers.AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()


def session(path: Path, threads: int | None = None, spin: bool = False) -> Any:
    """An onnxruntime CPU session: every graph optimization, `threads` for one operator (None: one per physical
    core, as onnxruntime's and torch's default, its workers placed as semantic/onnx_threads.py says), no spinning
    workers (idle threads would burn the cores a generation or the event loop needs between embeddings)."""
    import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type information

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    layout = process_layout()
    options.intra_op_num_threads = threads if threads is not None else layout.threads
    if threads is None and layout.worker_affinities is not None:
        options.add_session_config_entry("session.intra_op_thread_affinities", layout.worker_affinities)
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run(onnx_session: Any, batch: Any) -> Vectors:
    """Unit vectors for a tokenized batch (int arrays: input_ids, attention_mask, token_type_ids)."""
    feeds = {name: np.asarray(batch[name], dtype=np.int64) for name in INPUTS}
    with caller_pinned(process_layout().caller_cpus):  # beside onnxruntime's workers, not on one of their cores
        return np.ascontiguousarray(onnx_session.run(None, feeds)[0], dtype=np.float32)


def load_session(model_dir: Path, cache_dir: Path, encode: Callable[[list[str]], Any],
                 torch_side: Callable[[], tuple[Any, Callable[[list[str]], Vectors]]]) -> Any | None:
    """A checked onnxruntime session over the model, exporting it first if needed; None means: use torch.
    `encode` gives the model's inputs; `torch_side` (transformers' tokenizer, torch's embed) loads torch, and
    is called only to export."""
    try:
        name = f"all-MiniLM-L6-v2-{model_key(model_dir)}"
        target = private_dir(cache_dir) / f"{name}.onnx"
        probe = cache_dir / f"{name}.probe.npy"
        onnx_session = None
        if target.is_file():
            try:
                onnx_session, expected = session(target), np.load(probe, allow_pickle=False)
            except Exception as exc:  # noqa: BLE001 - a damaged file (a disk error): exported again below
                log.warning("L1: the ONNX embedding model did not load (%s); exporting it again", exc)
                onnx_session = None
                target.unlink()
        if onnx_session is None:
            log.info("L1: exporting the embedding model to ONNX into %s (first start only)", cache_dir)
            tokenizer, torch_embed = torch_side()
            export(eager_attention(model_dir), tokenizer, target, probe, torch_embed(list(PROBE_TEXTS)))
            for stale in cache_dir.glob("all-MiniLM-L6-v2-*"):  # an older model, torch or format: ~90 MB each
                if stale not in (target, probe) and ".partial-" not in stale.name:
                    stale.unlink(missing_ok=True)
            onnx_session, expected = session(target), np.load(probe, allow_pickle=False)
        cosine = float(np.min(np.sum(run(onnx_session, encode(list(PROBE_TEXTS))) * expected, axis=1)))
        if cosine < MIN_COSINE:
            log.warning("L1: the ONNX embedding model differs from torch (cosine %.6f); torch runs", cosine)
            return None
        return onnx_session
    except Exception as exc:  # noqa: BLE001 - any failure leaves the torch path, which always works
        log.warning("L1: no onnxruntime embedding (%s: %s); torch runs", type(exc).__name__, exc)
        return None
