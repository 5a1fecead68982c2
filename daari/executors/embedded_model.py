"""The process-wide embedded model (a GGUF file run by llama.cpp through xllamacpp) and its generation loop.

The model runs in llama.cpp's own native threads, outside the GIL; Python sees one callback per token. The
loop yields between tokens to request work (daari/cpu_budget.py): when a request is being parsed, hashed or
embedded, the stream stops after the token in flight and resumes, with its KV cache, once that work is done.
Nothing here knows about Trio: `on_text` and `check_cancelled` are bound by the executor.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daari.cpu_budget import REQUEST_WORK
from daari.datadir import default_data_dir, private_dir, write_atomically
from daari.errors import DaariError, InvalidRequest, ModelNotInstalled
from daari.executors.gguf_meta import metadata_string
from daari.models import DEFAULT_EMBEDDED_MODEL, EmbeddedModel, embedded_gguf, embedded_model, models_dir
from daari.protocol.chat import FinishReason

CONTEXT_WINDOW = 8192  # tokens of prompt + answer (both models are trained for at least this)
END_TOKENS = frozenset({"<|im_end|>", "<|endoftext|>", "<|im_start|>"})  # a new turn also ends ours
TEMPLATE_KEY = "tokenizer.chat_template"

log = logging.getLogger("daari")

OnText = Callable[[str, float | None, int], None]  # text, summed logprob of its tokens, token count
ChatTurn = dict[str, str]


class ModelLoadFailed(DaariError):
    status = 500
    code = "model_load_failed"


def generation_threads(configured: int | None = None) -> int:
    """llama.cpp threads for generation: `tiers.<tier>.threads`, else one core less than this process may use
    (at least 1, at most 4): the request path (parsing, hashing, the L1 embedding, the event loop) always keeps
    a core, so an agent turn beside a side call is not slowed by it (bench/side_call.py)."""
    if configured:
        return configured
    return max(1, min(4, len(os.sched_getaffinity(0)) - 1))


def compile_template(source: str) -> Any:
    """The model's chat template as Jinja (sandboxed, as transformers renders it)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise InvalidRequest(f"the embedded model's chat template refused the conversation: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


@dataclass(frozen=True)
class LoadedModel:
    model: EmbeddedModel
    server: Any  # xllamacpp.Server: the model and its context, one slot
    template: Any  # the compiled chat template
    context_window: int
    threads: int

    def render_chat(self, turns: list[ChatTurn]) -> str:
        """The conversation in the model's chat template, ending with the assistant's generation prompt."""
        return str(self.template.render(messages=turns, add_generation_prompt=True, tools=None,
                                        bos_token="", eos_token="<|im_end|>"))

    def estimate_tokens(self, turns: list[ChatTurn]) -> int:
        """An upper estimate of the prompt's tokens (no tokenizer load: 3 UTF-8 bytes a token; English and code
        take 3.3-4.5), used only to drop old turns; llama.cpp counts exactly and its count is reported."""
        return len(self.render_chat(turns).encode()) // 3 + 1


def _start_server(path: Path, threads: int, context_window: int) -> Any:
    import xllamacpp  # type: ignore[import-untyped]

    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = context_window
    params.n_parallel = 1  # one generation at a time: two on two cores only halve each other
    params.n_batch = 512
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.cpuparams.poll = 0  # sleep, never spin, between ops: spinning threads starve the request path
    params.cpuparams_batch.poll = 0
    params.warmup = False
    params.verbosity = -1
    params.cache_prompt = True
    # xllamacpp also serves llama.cpp's HTTP API on a random loopback port. daari never uses it: a key that
    # only this process ever held closes it to every other local process (all but /health answer 401), and
    # the endpoints that would show prompts in flight (/slots) or the web UI are off.
    params.api_keys = [secrets.token_urlsafe(32)]
    params.endpoint_slots = False
    params.endpoint_props = False
    params.endpoint_metrics = False
    params.ui = False
    params.n_threads_http = 1
    return xllamacpp.Server(params)


def chat_template(model: EmbeddedModel, path: Path, data_dir: Path) -> str:
    """The GGUF's chat template, read from its header once and kept in `<data_dir>/models/` (by file hash)."""
    kept = private_dir(models_dir(data_dir)) / f"{model.model_id}-{model.sha256[:16]}.chat_template.jinja"
    try:
        return kept.read_text()
    except FileNotFoundError:
        pass
    source = metadata_string(path, TEMPLATE_KEY)
    if not source:
        raise ModelLoadFailed(f"{path} has no chat template")
    write_atomically(kept, lambda partial: partial.write_text(source))
    return source


def _load(model: EmbeddedModel, data_dir: Path, threads: int) -> LoadedModel:
    path = embedded_gguf(model, data_dir)
    source = chat_template(model, path, data_dir)
    server = _start_server(path, threads, CONTEXT_WINDOW)
    return LoadedModel(model, server, compile_template(source), CONTEXT_WINDOW, threads)


class ModelHolder:
    """Loads one embedded model once per process, whichever thread asks first; later callers share it.

    A failed load is remembered for `status()` and tried again on the next `load()`, so installing a
    missing package takes effect without a restart.
    """

    def __init__(self, model: EmbeddedModel) -> None:
        self.model = model
        self.name = model.name
        self.data_dir: Path | None = None  # where a model shipped in parts is joined (None: the default)
        self.threads: int | None = None  # llama.cpp generation threads (None: `generation_threads()`)
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
            log.info("loading embedded model %s...", self.name)
            started = time.monotonic()
            try:
                loaded = _load(self.model, self.data_dir or Path(default_data_dir()),
                               generation_threads(self.threads))
            except ModelNotInstalled as exc:
                self.error = exc.message
                raise
            except DaariError as exc:
                self.error = exc.message
                log.error("%s", self.error)
                raise
            except Exception as exc:
                detail = str(exc).splitlines()[0][:300] if str(exc) else ""
                self.error = f"embedded model {self.name} failed to load: {type(exc).__name__}: {detail}"
                log.error("%s", self.error)
                raise ModelLoadFailed(self.error) from exc
            self.load_seconds = round(time.monotonic() - started, 1)
            self.error = None
            self._loaded = loaded
            log.info("embedded model ready in %.1fs (%d threads)", self.load_seconds, loaded.threads)
            return loaded


_HOLDERS: dict[str, ModelHolder] = {}
_HOLDERS_LOCK = threading.Lock()


def holder_for(model_id: str | None = None, data_dir: str | Path | None = None,
               threads: int | None = None) -> ModelHolder:
    """The process-wide holder of an embedded model (every executor naming it shares the loaded model; the
    first to name a data dir or a thread count before the load sets it)."""
    model = embedded_model(model_id)
    with _HOLDERS_LOCK:
        holder = _HOLDERS.setdefault(model.model_id, ModelHolder(model))
        if data_dir is not None and holder.data_dir is None:
            holder.data_dir = Path(data_dir)
        if threads is not None and holder.threads is None:
            holder.threads = threads
    return holder


EMBEDDED = holder_for(DEFAULT_EMBEDDED_MODEL)  # the default model's holder (the verifier and evals use it)
MODEL_NAME = EMBEDDED.name  # the default embedded model's name and id (evals label their answers with them)
MODEL_ID = EMBEDDED.model.model_id


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
    prompt_tokens: int = 0  # as llama.cpp counted them


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


def _sampling(settings: GenerationSettings, done: int) -> dict[str, Any]:
    """llama.cpp's sampling fields for the client's settings: greedy at temperature 0, otherwise plain
    temperature sampling with only the client's own top_p / top_k (llama.cpp's defaults would add more)."""
    fields: dict[str, Any] = {"temperature": settings.temperature, "repeat_penalty": 1.0, "min_p": 0.0,
                              "top_k": settings.top_k or 0, "top_p": settings.top_p or 1.0}
    if settings.seed is not None:
        fields["seed"] = (int(settings.seed) + done) % (2**32 - 1)  # a resumed stream continues, not repeats
    return fields


def generate_blocking(
    loaded: LoadedModel,
    prompt: str,
    settings: GenerationSettings,
    on_text: OnText,
    check_cancelled: Callable[[], None],
) -> GenerationResult:
    """`_generate`, counted as a running generation: while one runs, requests mark their own CPU work so it
    goes first (daari/cpu_budget.py)."""
    with REQUEST_WORK.generation():
        return _generate(loaded, prompt, settings, on_text, check_cancelled)


def _generate(
    loaded: LoadedModel,
    prompt: str,
    settings: GenerationSettings,
    on_text: OnText,
    check_cancelled: Callable[[], None],
) -> GenerationResult:
    """Generate with llama.cpp, calling `on_text` for each piece of finished text; returns the finish reason,
    the tokens generated and the prompt's token count.

    `check_cancelled` runs after every token and stops the stream by raising. Each piece carries the summed
    log-probability (the model's own distribution) of the tokens it completes. Between two tokens the stream
    stops for pending request work and resumes after it with the prompt's and the answer's KV cache.
    """
    stops = StopSequenceBuffer(settings.stop)
    generated: list[int] = []
    prompt_tokens = 0
    pending_logprob = 0.0
    pending_tokens = 0
    reason: FinishReason | None = None
    failure: list[BaseException] = []  # raised in the callback, raised again after the native call
    error: list[Any] = []  # llama.cpp's own error (a prompt longer than the context...)

    def send(text: str) -> None:
        nonlocal pending_logprob, pending_tokens
        if text:
            on_text(text, pending_logprob if pending_tokens else None, pending_tokens)
            pending_logprob, pending_tokens = 0.0, 0

    while reason is None and len(generated) < settings.max_new_tokens:
        REQUEST_WORK.yield_to_requests()  # a waiting request's parse or embedding goes first
        check_cancelled()

        def on_chunk(chunk: Any) -> bool:
            """One streamed token (or the end); True stops the stream."""
            nonlocal reason, pending_logprob, pending_tokens, prompt_tokens
            try:
                if isinstance(chunk, dict) and "error" in chunk:
                    error.append(chunk["error"])
                    return True
                usage = chunk.get("usage") or {}
                prompt_tokens = int(usage.get("prompt_tokens") or prompt_tokens)
                choices = chunk.get("choices") or []
                choice = choices[0] if choices else {}
                for item in (choice.get("logprobs") or {}).get("content") or []:
                    if item.get("token") in END_TOKENS:
                        reason = "stop"
                        return True
                    generated.append(int(item["id"]))
                    pending_logprob += float(item.get("logprob") or 0.0)
                    pending_tokens += 1
                if choice.get("text"):
                    send(stops.push(choice["text"]))
                if stops.matched is not None:
                    return True
                if choice.get("finish_reason") in ("stop", "length"):
                    reason = choice["finish_reason"]
                check_cancelled()
                return REQUEST_WORK.pending() > 0  # stop after this token: request work goes first
            except BaseException as exc:  # raised again outside the native call (trio.Cancelled included)
                failure.append(exc)
                return True

        body: dict[str, Any] = {
            # The prompt as text, then the answer so far as token ids: a resumed stream continues exactly,
            # and llama.cpp's prompt cache finds both already evaluated.
            "prompt": [prompt, *generated] if generated else prompt,
            "n_predict": settings.max_new_tokens - len(generated),
            "stream": True, "n_probs": 1,
            # A seeded sample must repeat: the prompt is evaluated whole (a reused cache evaluates its last
            # token alone, with slightly different numerics); a resumed stream continues from the cache.
            "cache_prompt": bool(generated) or settings.seed is None,
            **_sampling(settings, len(generated)),
        }
        # Not under the inference slot: llama.cpp computes a token in one native call we cannot interrupt, and
        # an embedding waiting for it would wait a whole token; with a core left to the request path, the
        # embedding runs beside the token in flight and the stream stops after it.
        loaded.server.handle_completions(body, on_chunk)
        if failure:
            raise failure[0]
        if error:
            raise _generation_error(error[0])
        if stops.matched is not None:
            return GenerationResult("stop_sequence", len(generated), stops.matched, prompt_tokens)
    send(stops.flush())
    return GenerationResult(reason or "length", len(generated), None, prompt_tokens)


def _generation_error(error: Any) -> DaariError:
    message = str(error.get("message") if isinstance(error, dict) else error)[:300]
    kind = str(error.get("type") if isinstance(error, dict) else "")
    if "context" in kind or "context" in message:
        return InvalidRequest(f"the prompt does not fit the embedded model's context window: {message}",
                              code="context_length_exceeded")
    return ModelLoadFailed(f"the embedded model failed: {message}")


