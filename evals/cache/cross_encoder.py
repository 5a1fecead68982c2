"""A cross-encoder over the embedded all-MiniLM-L6-v2: the pair read as one sequence, low-rank adapters on top.

The pair goes in as `[CLS] a [SEP] b [SEP]`; the top TOP_LAYERS layers' attention query and value linears get
rank-RANK adapters (LoRA), the rest of the model stays as shipped, and a linear head on the mean-pooled last
layer gives the log-odds that one answer serves both prompts. Only the adapters and the head would be stored
(fp16 .npz, about 50 KB). Measured by evals/cache/train_cross_encoder.py on the tune halves only and not
shipped as a verify mode: docs/caching.md, "A cross-encoder, measured". Training and measurement only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

RANK = 8
ALPHA = 16.0
TOP_LAYERS = 2  # layers below these are unchanged, so training can run them once per pair
MAX_TOKENS = 128  # both prompts together; L1 compares short final turns


def build(base: Any) -> Any:
    """A torch module: `base` (a transformers BertModel, left unchanged) with adapters and a head added."""
    import torch
    from torch import nn

    class LoRALinear(nn.Module):
        def __init__(self, linear: nn.Linear) -> None:
            super().__init__()
            self.linear = linear
            self.a = nn.Parameter(torch.randn(RANK, linear.in_features) / math.sqrt(linear.in_features))
            self.b = nn.Parameter(torch.zeros(linear.out_features, RANK))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x) + (x @ self.a.T @ self.b.T) * (ALPHA / RANK)

    class CrossEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base = base
            for p in base.parameters():
                p.requires_grad_(False)
            layers = base.encoder.layer
            self.first_top = len(layers) - TOP_LAYERS
            self.adapters = nn.ModuleList()
            for layer in layers[self.first_top:]:
                attn = layer.attention.self
                attn.query = LoRALinear(attn.query)
                attn.value = LoRALinear(attn.value)
                self.adapters.extend([attn.query, attn.value])
            self.head = nn.Linear(base.config.hidden_size, 1)
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

        def top(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            """Log-odds from the hidden states entering the top layers (B x T x H) and the padding mask (B x T)."""
            additive = (1.0 - mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
            for layer in self.base.encoder.layer[self.first_top:]:
                out = layer(hidden, attention_mask=additive)
                hidden = out[0] if isinstance(out, tuple) else out
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return self.head(pooled).squeeze(-1)  # type: ignore[no-any-return]

        def forward(self, **batch: torch.Tensor) -> torch.Tensor:
            hidden = self.base(**batch).last_hidden_state
            m = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return self.head(pooled).squeeze(-1)  # type: ignore[no-any-return]

    return CrossEncoder()


def trainable(model: Any) -> dict[str, Any]:
    """The parameters the weights file stores, by name (adapters and head)."""
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def save(model: Any, path: Path, info: dict[str, Any]) -> None:
    import json

    arrays = {n: p.detach().numpy().astype(np.float16) for n, p in trainable(model).items()}
    np.savez_compressed(path, __info__=np.array(json.dumps(info)), **arrays)


def load_into(model: Any, path: Path) -> dict[str, Any]:
    """Copy the stored adapters and head into `model`; a file for another shape is a clear error."""
    import json

    import torch

    params = trainable(model)
    with np.load(path) as data:
        stored = {n: data[n] for n in data.files if n != "__info__"}
        info: dict[str, Any] = json.loads(str(data["__info__"])) if "__info__" in data.files else {}
    if set(stored) != set(params) or any(stored[n].shape != tuple(p.shape) for n, p in params.items()):
        raise ValueError(f"cross-encoder weights at {path} do not fit this code's adapters: retrain with "
                         "evals/cache/train_cross_encoder.py")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(torch.from_numpy(stored[n].astype(np.float32)))
    return info
