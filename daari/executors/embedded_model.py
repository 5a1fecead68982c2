"""The process-wide SmolLM2 model (loaded once, thread-safe) and its blocking token-by-token generation loop.

Nothing here knows about Trio: the loop takes `on_text` and `check_cancelled` callbacks, which the executor
binds to `trio.from_thread.run` and `trio.from_thread.check_cancelled` when it runs the loop in a thread.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daari.cpu_budget import MODEL_LOADING, REQUEST_WORK, Priority, inference_slot
from daari.errors import DaariError, ModelNotInstalled
from daari.heap import freeze_long_lived
from daari.models import SMOLLM2_PACKAGE, ModelPackage, locate
from daari.protocol.chat import FinishReason

if TYPE_CHECKING:
    import torch

MODEL_NAME = "SmolLM2-135M-Instruct"
MODEL_ID = "smollm2-135m-instruct"  # the id clients see in /v1/models and in responses
DEFAULT_CONTEXT_WINDOW = 8192

log = logging.getLogger("daari")

OnText = Callable[[str, float | None, int], None]  # text, summed logprob of its tokens, token count


class ModelLoadFailed(DaariError):
    status = 500
    code = "model_load_failed"


@dataclass(frozen=True)
class LoadedModel:
    tokenizer: Any
    model: Any
    context_window: int
    end_token_ids: frozenset[int]  # <|im_end|>, <|endoftext|>, and <|im_start|> (a new turn also ends ours)
    cache_argument: str  # "cache" in transformers 5, "past_key_values" before
    prefill_logits_argument: str | None  # "logits_to_keep" where the model has it: skip the prompt's logits

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of `messages` in the chat template, ending with the assistant's generation prompt."""
        encoded = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        # transformers 5 returns a BatchEncoding, 4.x a plain list of ids.
        ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
        return list(ids)


def _silence_transformers() -> None:
    """One progress line from daari instead of transformers' bars and deprecation chatter."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        # The GGUF de-quantizing bar is a bare tqdm that ignores disable_progress_bar.
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # pragma: no cover - depends on the transformers version
        return
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None and not isinstance(bar, functools.partial):
        gguf_utils.tqdm = functools.partial(bar, disable=True)  # type: ignore[attr-defined]


def _load_from(gguf_path: Any) -> LoadedModel:
    with MODEL_LOADING:  # never beside another thread's transformers import (daari/cpu_budget.py)
        loaded = _load_unlocked(gguf_path)
    freeze_long_lived("embedded model")
    return loaded


def _load_unlocked(gguf_path: Any) -> LoadedModel:
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is ever fetched from a hub at run time
    # Spinning OpenMP workers make a busy machine 5-10x slower per token (measured on 2 cores with two
    # other busy processes); sleeping workers cost little when idle. Read once, when torch loads libgomp.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import transformers

    _silence_transformers()
    directory, name = str(gguf_path.parent), gguf_path.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name)
    model.eval()  # type: ignore[no-untyped-call]
    ends = {tokenizer.eos_token_id}
    for token in ("<|im_end|>", "<|endoftext|>", "<|im_start|>"):
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
            ends.add(token_id)
    configured = model.generation_config.eos_token_id
    ends.update(configured if isinstance(configured, list) else [configured])
    parameters = inspect.signature(model.forward).parameters
    prefill = next((p for p in ("logits_to_keep", "num_logits_to_keep") if p in parameters), None)
    return LoadedModel(
        tokenizer=tokenizer,
        model=model,
        context_window=int(getattr(model.config, "max_position_embeddings", 0) or DEFAULT_CONTEXT_WINDOW),
        end_token_ids=frozenset(t for t in ends if t is not None),
        cache_argument="cache" if "cache" in parameters else "past_key_values",
        prefill_logits_argument=prefill,
    )


class ModelHolder:
    """Loads the model once per process, whichever thread asks first; later callers share it.

    A failed load is remembered for `status()` and tried again on the next `load()`, so installing a
    missing package takes effect without a restart.
    """

    def __init__(self, package: ModelPackage = SMOLLM2_PACKAGE, name: str = MODEL_NAME) -> None:
        self.package = package
        self.name = name
        self._lock = threading.Lock()
        self._loaded: LoadedModel | None = None
        self.load_seconds: float | None = None
        self.error: str | None = None

    @property
    def loaded(self) -> LoadedModel | None:
        return self._loaded

    def load(self) -> LoadedModel:
        """Blocking: the loaded model, loading it first if no thread has. Raises a `DaariError`."""
        if self._loaded is not None:
            return self._loaded
        with self._lock:
            if self._loaded is not None:
                return self._loaded
            try:
                path = locate(self.package)
            except ModelNotInstalled as exc:
                self.error = exc.message
                raise
            log.info("loading embedded model %s...", self.name)
            started = time.monotonic()
            try:
                loaded = _load_from(path)
            except Exception as exc:
                detail = str(exc).splitlines()[0][:300] if str(exc) else ""
                self.error = f"embedded model {self.name} failed to load: {type(exc).__name__}: {detail}"
                log.error("%s", self.error)
                raise ModelLoadFailed(self.error) from exc
            self.load_seconds = round(time.monotonic() - started, 1)
            self.error = None
            self._loaded = loaded
            log.info("embedded model ready in %.1fs", self.load_seconds)
            return loaded


SMOLLM2 = ModelHolder()  # the process-wide holder every EmbeddedExecutor shares


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int
    temperature: float = 0.0  # 0: greedy
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationResult:
    reason: FinishReason
    completion_tokens: int
    stop_sequence: str | None = None


class IncrementalDecoder:
    """Turns token ids into text pieces without splitting a multi-byte character across pieces.

    Decodes the whole id list each step (byte-level BPE decodes prefix-stably) and hands out the new
    suffix, holding back trailing U+FFFD: the bytes of an unfinished character.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.seen = ""

    def _decode(self) -> str:
        return str(self.tokenizer.decode(self.ids, skip_special_tokens=True,
                                         clean_up_tokenization_spaces=False))

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        stable = self._decode().rstrip("\ufffd")
        if len(stable) <= len(self.seen):
            return ""
        piece = stable[len(self.seen):]
        self.seen = stable
        return piece

    def flush(self) -> str:
        """What is still held back at the end: genuinely invalid bytes, shown as U+FFFD."""
        text = self._decode()
        piece = text[len(self.seen):] if text.startswith(self.seen) else ""
        self.seen = text
        return piece


class StopSequenceBuffer:
    """Passes text through until a stop sequence appears, holding back any tail that may start one."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self.held = ""
        self.matched: str | None = None

    def push(self, text: str) -> str:
        """The text that is safe to send now; after a match, the text before the stop and nothing more."""
        if self.matched is not None:
            return ""
        full = self.held + text
        hits = [(full.find(s), s) for s in self.stops if s in full]
        if hits:
            index, stop = min(hits, key=lambda hit: hit[0])
            self.matched = stop
            self.held = ""
            return full[:index]
        keep = self._open_prefix_length(full)
        self.held = full[len(full) - keep:]
        return full[:len(full) - keep]

    def flush(self) -> str:
        held, self.held = self.held, ""
        return held

    def _open_prefix_length(self, text: str) -> int:
        """Length of the longest tail of `text` that a stop sequence starts with."""
        longest = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if stop.startswith(text[len(text) - size:]):
                    longest = size
                    break
        return longest


def _choose_token(logits: torch.Tensor, settings: GenerationSettings,
                  generator: torch.Generator | None) -> int:
    import torch

    if settings.temperature <= 0 or generator is None:
        return int(torch.argmax(logits))
    scores = logits / settings.temperature
    if settings.top_k is not None and 0 < settings.top_k < scores.numel():
        kth = torch.topk(scores, settings.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if settings.top_p is not None and 0 < settings.top_p < 1:
        ordered, order = torch.sort(scores, descending=True)
        probs = torch.softmax(ordered, dim=-1)
        # Keep the smallest head whose mass reaches top_p; the most likely token always stays.
        outside = torch.cumsum(probs, dim=-1) - probs > settings.top_p
        ordered = ordered.masked_fill(outside, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(0, order, ordered)
    probs = torch.softmax(scores, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def generate_blocking(
    loaded: LoadedModel,
    prompt_ids: list[int],
    settings: GenerationSettings,
    on_text: OnText,
    check_cancelled: Callable[[], None],
) -> GenerationResult:
    """Run the model token by token with a KV cache, calling `on_text` for each piece of finished text.

    `check_cancelled` runs before every forward step and stops the loop by raising. Each piece carries
    the summed log-probability (untempered: the model's own distribution) of the tokens it completes.
    """
    import torch

    generator: torch.Generator | None = None
    if settings.temperature > 0:
        generator = torch.Generator()
        if settings.seed is not None:
            generator.manual_seed(int(settings.seed))
        else:
            generator.seed()
    decoder = IncrementalDecoder(loaded.tokenizer)
    stops = StopSequenceBuffer(settings.stop)
    pending_logprob = 0.0
    pending_tokens = 0

    def send(text: str) -> None:
        nonlocal pending_logprob, pending_tokens
        if text:
            on_text(text, pending_logprob if pending_tokens else None, pending_tokens)
            pending_logprob, pending_tokens = 0.0, 0

    model = loaded.model
    inputs = torch.tensor([prompt_ids], dtype=torch.long)
    cache: Any = None
    generated = 0
    reason: FinishReason = "length"
    with torch.inference_mode():
        while generated < settings.max_new_tokens:
            REQUEST_WORK.yield_to_requests()  # a waiting request's parse or embedding goes first
            check_cancelled()
            kwargs: dict[str, Any] = {loaded.cache_argument: cache, "use_cache": True}
            if cache is None and loaded.prefill_logits_argument:
                kwargs[loaded.prefill_logits_argument] = 1
            with inference_slot(Priority.GENERATION):  # one step; an embedding batch goes ahead of the next
                output = model(input_ids=inputs, **kwargs)
            cache = output.cache if hasattr(output, "cache") else output.past_key_values
            logits = output.logits[0, -1].float()
            token = _choose_token(logits, settings, generator)
            if token in loaded.end_token_ids:
                reason = "stop"
                break
            generated += 1
            pending_logprob += float(torch.log_softmax(logits, dim=-1)[token])
            pending_tokens += 1
            send(stops.push(decoder.push(token)))
            if stops.matched is not None:
                return GenerationResult("stop_sequence", generated, stops.matched)
            inputs = torch.tensor([[token]], dtype=torch.long)
    send(stops.push(decoder.flush()))
    if stops.matched is not None:
        return GenerationResult("stop_sequence", generated, stops.matched)
    send(stops.flush())
    return GenerationResult(reason, generated)
