"""evals/cache/cross_encoder.py with the real embedded MiniLM: training's shortcut (the lower layers run once,
only the top layers per step) scores exactly as the whole model does; adapters start as the shipped model;
the weights file round-trips and a file for other adapters is refused (docs/caching.md, "A cross-encoder,
measured")."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evals/cache"))

torch = pytest.importorskip("torch")

import cross_encoder as ce  # noqa: E402
from train_cross_encoder import collate, fresh_model, lower_states  # noqa: E402

PAIRS = [("user: How do I list Docker containers?", "user: Show all running Docker containers"),
         ("user: a", "user: What is the capital of France, and how many people live there?")]


def whole(model: object, tokenizer: object) -> np.ndarray:
    batch = tokenizer([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True,  # type: ignore[operator]
                      truncation=True, max_length=ce.MAX_TOKENS, return_tensors="pt")
    with torch.inference_mode():
        return model(**batch).numpy()  # type: ignore[operator, no-any-return]


def test_the_top_layers_over_the_stored_lower_states_score_as_the_whole_model() -> None:
    tokenizer, model = fresh_model()
    torch.manual_seed(1)
    for p in ce.trainable(model).values():  # adapters away from their start, so they count
        torch.nn.init.normal_(p, std=0.1)
    hidden, mask = collate(lower_states(model, tokenizer, PAIRS), np.arange(len(PAIRS)))
    with torch.inference_mode():
        shortcut = model.top(hidden, mask).numpy()  # type: ignore[attr-defined]
    assert np.allclose(shortcut, whole(model, tokenizer), atol=1e-4)
    assert abs(shortcut[0] - shortcut[1]) > 1e-3  # the two pairs are told apart, not one constant


def test_new_adapters_leave_the_shipped_model_as_it_is_and_the_head_undecided() -> None:
    import transformers

    from daari.models import minilm_dir

    tokenizer, model = fresh_model()
    plain = transformers.AutoModel.from_pretrained(str(minilm_dir()), attn_implementation="eager").eval()
    batch = tokenizer(*PAIRS[0], return_tensors="pt")  # type: ignore[operator]
    with torch.inference_mode():
        adapted = model.base(**batch).last_hidden_state  # type: ignore[attr-defined]
        shipped = plain(**batch).last_hidden_state
    assert torch.allclose(adapted, shipped, atol=1e-5)
    assert np.allclose(whole(model, tokenizer), 0.0)  # log-odds 0: p = 0.5 before training


def test_the_weights_file_round_trips_and_a_file_for_other_adapters_is_refused(tmp_path: Path) -> None:
    tokenizer, model = fresh_model()
    torch.manual_seed(2)
    for p in ce.trainable(model).values():
        torch.nn.init.normal_(p, std=0.1)
    path = tmp_path / "xenc.npz"
    ce.save(model, path, {"seed": 2})
    assert path.stat().st_size < 2 * 1024 * 1024
    before = whole(model, tokenizer)
    _, other = fresh_model()
    assert ce.load_into(other, path) == {"seed": 2}
    assert np.allclose(whole(other, tokenizer), before, atol=0.05)  # stored as fp16
    arrays = dict(np.load(path))
    arrays.pop(next(n for n in arrays if n.startswith("head")))
    np.savez(tmp_path / "short.npz", **arrays)
    with pytest.raises(ValueError, match="train_cross_encoder.py"):
        ce.load_into(other, tmp_path / "short.npz")
