"""The ONNX path of the embedding model (daari/semantic/minilm_onnx.py): the same vectors as torch, exported
once per model and exporter, and torch whenever the export cannot be used. Real model, no mocks."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from daari.models import minilm_dir
from daari.semantic import minilm_onnx
from daari.semantic.minilm import MAX_TOKENS, load_minilm

TEXTS = ["user: How do I list Docker containers?",
         "user: Wie kann ich den letzten Commit rückgängig machen? 日本語も",
         "system: be terse\nuser: reverse a string in Python\nassistant: s[::-1]\nuser: and in Rust?",
         "user: " + "merge two dictionaries and keep the larger value for shared keys; " * 60]  # past 256 pieces


def test_the_onnx_path_gives_the_torch_vectors_alone_and_in_padded_batches() -> None:
    model = load_minilm()
    assert model.session is not None  # onnxruntime is a dependency: the fast path is what daari runs
    assert model.token_count(TEXTS[-1]) > MAX_TOKENS
    batched, reference = model.embed(TEXTS), model.embed_torch(TEXTS)
    assert batched.shape == reference.shape == (len(TEXTS), 384) and batched.dtype == np.float32
    assert float(np.min(np.sum(batched * reference, axis=1))) >= minilm_onnx.MIN_COSINE
    for i, text in enumerate(TEXTS):  # alone: no padding, a different sequence length than in the batch
        assert float(model.embed([text])[0] @ reference[i]) >= minilm_onnx.MIN_COSINE
    assert model.embed([]).shape == (0, 384)


def torch_side() -> tuple[object, object]:
    model = load_minilm()
    return model.tokenizer, model.embed_torch


def test_a_fresh_models_dir_gets_one_private_export_and_reuses_it(tmp_path: Path) -> None:
    model = load_minilm()
    cache_dir = tmp_path / "models"
    cache_dir.mkdir()
    (cache_dir / "all-MiniLM-L6-v2-0123456789abcdef.onnx").write_bytes(b"an older export")  # removed
    session = minilm_onnx.load_session(minilm_dir(), cache_dir, model.encode_window, torch_side)
    assert session is not None
    exported, probe = sorted(cache_dir.iterdir())  # the graph and torch's vectors, no partial file beside them
    assert exported.suffix == ".onnx" and probe.name.endswith(".probe.npy")
    assert exported.stat().st_mode & 0o777 == probe.stat().st_mode & 0o777 == 0o600
    written = exported.stat().st_mtime_ns
    again = minilm_onnx.load_session(minilm_dir(), cache_dir, model.encode_window, torch_side)
    assert again is not None and exported.stat().st_mtime_ns == written  # loaded, not exported again


def test_the_export_runs_each_layers_attention_as_one_fused_operator(tmp_path: Path) -> None:
    model = load_minilm()
    session = minilm_onnx.load_session(minilm_dir(), tmp_path, model.encode_window, torch_side)
    assert session is not None
    exported = next(tmp_path.glob("*.onnx"))
    layers = model.model.config.num_hidden_layers
    assert minilm_onnx.attention_operators(exported) == layers == 6
    assert not list(tmp_path.glob("*.fused.onnx"))  # the optimizer's output was renamed onto the export
    fused = model.encode_window(TEXTS)
    reference = model.embed_torch(TEXTS)
    assert float(np.min(np.sum(minilm_onnx.run(session, fused) * reference, axis=1))) >= minilm_onnx.MIN_COSINE


def test_a_graph_the_fusion_cannot_read_is_left_as_it_was(tmp_path: Path) -> None:
    graph = tmp_path / "graph.onnx"
    graph.write_bytes(b"not an ONNX graph")
    assert minilm_onnx.fuse_attention(graph, heads=12, hidden=384) == 0
    assert graph.read_bytes() == b"not an ONNX graph"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.onnx"]


def test_a_damaged_export_is_exported_again(tmp_path: Path) -> None:
    model = load_minilm()
    cache_dir = tmp_path / "models"
    cache_dir.mkdir()
    damaged = cache_dir / f"all-MiniLM-L6-v2-{minilm_onnx.model_key(minilm_dir())}.onnx"
    damaged.write_bytes(b"not a model")
    assert minilm_onnx.load_session(minilm_dir(), cache_dir, model.encode_window, torch_side) is not None
    assert damaged.stat().st_size > 1_000_000


def test_a_session_whose_vectors_differ_from_torch_is_refused(tmp_path: Path) -> None:
    model = load_minilm()

    def other_vectors(texts: list[str]) -> np.ndarray:
        return np.roll(model.embed_torch(texts), 1, axis=1)  # unit vectors still, but not these texts'

    assert minilm_onnx.load_session(minilm_dir(), tmp_path, model.encode_window,
                                    lambda: (model.tokenizer, other_vectors)) is None


def test_the_onnx_path_runs_without_importing_torch(tmp_path: Path) -> None:
    load_minilm()  # the export exists in DAARI_MODELS_DIR (tests/conftest.py) from here on
    script = ("import sys; from daari.semantic.minilm import load_minilm; m = load_minilm(); "
              "assert m.session is not None; m.embed(['user: hi']); m.seen_chars(['user: hi']); "
              "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}).stdout
    assert out.split() == ["False", "False"]


def test_a_process_that_exits_while_the_session_is_built_ends_cleanly() -> None:
    """The server loads the model on a thread it abandons when it stops; onnxruntime builds its session without
    the GIL. The exit waits for the load: exiting under it aborted the process (std::bad_alloc, then terminate)."""
    script = """if True:
        import threading
        import onnxruntime
        from daari.semantic import minilm

        building = threading.Event()

        class WatchedSession(onnxruntime.InferenceSession):
            def __init__(self, *args, **kwargs):
                building.set()
                super().__init__(*args, **kwargs)

        onnxruntime.InferenceSession = WatchedSession
        threading.Thread(target=minilm.load_minilm, daemon=True).start()
        assert building.wait(120)
        print("exiting while the session is built")
    """
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "exiting while the session is built"
