"""The embedded executor: answers a tier with a small instruct model running in-process on the CPU (llama.cpp).

Choices (see docs/architecture.md):
- Temperature: unset or 0 means greedy. OpenAI's default is 1, but a local cache-fronting proxy wants the
  same request to give the same answer, so sampling happens only when the client asks for it (> 0).
- Model: `tiers.<tier>.model` names one of daari/models.py's EMBEDDED_MODELS (default
  qwen2.5-coder-0.5b-instruct; docs/performance.md has the comparison that chose it).
- Context window (8192): the answer keeps a reserve of min(max_tokens, window / 4) tokens; a longer prompt
  (by a cautious estimate: 3 bytes a token) loses its oldest non-system messages first (the system messages
  and the last message always stay). If even those do not fit the window, the request is refused
  (InvalidRequest, context_length_exceeded).
- One generation at a time per executor (CapacityLimiter(1)): two cores give no gain from two at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import trio

from daari.config import TierConfig
from daari.cpu_budget import REQUEST_WORK
from daari.errors import InvalidRequest, ToolCallsUnsupportedLocally
from daari.executors.base import Emit, Executor, read_done
from daari.executors.embedded_model import (
    CONTEXT_WINDOW,
    GenerationResult,
    GenerationSettings,
    LoadedModel,
    ModelHolder,
    generate_blocking,
    holder_for,
)
from daari.protocol.chat import ChatRequest, Message, Usage
from daari.protocol.events import Finish, TextDelta
from daari.routing.agent_turn import needs_tool_calls

IMAGE_NOTE = "[image omitted: this model cannot see images]"

ChatTurn = dict[str, str]


def _content_text(message: Message) -> str:
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    lines: list[str] = []
    for part in message.content:
        kind = part.get("type")
        if kind == "text":
            lines.append(str(part.get("text", "")))
        elif kind == "image":
            lines.append(IMAGE_NOTE)
        else:
            lines.append(f"[{kind} omitted]")
    return "\n".join(lines)


def prompt_messages(messages: list[Message]) -> list[ChatTurn]:
    """The request's history as the plain system/user/assistant turns the model's chat template knows.

    The model has no tool format: an assistant's tool calls become text lines in its turn, and a tool
    result becomes a user turn naming the tool, so an agent's history still reads as a conversation.
    """
    call_names = {call.id: call.name for m in messages for call in m.tool_calls}
    turns: list[ChatTurn] = []
    for message in messages:
        text = _content_text(message)
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            tool = message.name or call_names.get(call_id) or call_id or "tool"
            label = "error from tool" if message.is_error else "result of tool"
            turns.append({"role": "user", "content": f"[{label} {tool}]\n{text}"})
        elif message.role == "assistant" and message.tool_calls:
            calls = [f"[called tool {c.name} with arguments {c.arguments}]" for c in message.tool_calls]
            turns.append({"role": "assistant", "content": "\n".join([text, *calls] if text else calls)})
        else:
            turns.append({"role": message.role, "content": text})
    return turns


@dataclass(frozen=True)
class FittedPrompt:
    turns: list[ChatTurn]
    tokens: int  # as `count` measured them
    max_new_tokens: int
    dropped_messages: int  # oldest non-system messages left out to fit the window


def fit_prompt(count: Callable[[list[ChatTurn]], int], turns: list[ChatTurn], window: int,
               max_new_tokens: int) -> FittedPrompt:
    """The turns that fit `window` with room for the answer, dropping the oldest turns first."""
    reserve = min(max_new_tokens, window // 4)
    budget = window - reserve
    droppable = [i for i, t in enumerate(turns) if t["role"] != "system" and i != len(turns) - 1]

    def without_oldest(number: int) -> list[ChatTurn]:
        gone = set(droppable[:number])
        return [t for i, t in enumerate(turns) if i not in gone]

    kept = without_oldest(0)
    size = count(kept)
    dropped = 0
    if size > budget and droppable:
        # Dropping more turns never lengthens the prompt: binary-search the fewest that fit (or all).
        low, high = 1, len(droppable)
        while low < high:
            middle = (low + high) // 2
            if count(without_oldest(middle)) <= budget:
                high = middle
            else:
                low = middle + 1
        dropped = low
        kept = without_oldest(dropped)
        size = count(kept)
    if size >= window:
        raise InvalidRequest(
            f"the prompt is about {size} tokens after dropping old messages; the embedded model's context "
            f"window is {window} tokens",
            code="context_length_exceeded",
        )
    return FittedPrompt(kept, size, min(max_new_tokens, window - size), dropped)


def _number(sampling: dict[str, Any], key: str, kind: type[int] | type[float]) -> Any:
    value = sampling.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequest(f"{key} must be a number", param=key)
    return kind(value)


def generation_settings(request: ChatRequest, default_max_tokens: int) -> GenerationSettings:
    """What to generate: the client's sampling parameters, greedy when it set no temperature."""
    max_tokens = request.max_tokens if request.max_tokens is not None else default_max_tokens
    if max_tokens < 1:
        raise InvalidRequest("max_tokens must be at least 1", param="max_tokens")
    temperature = request.temperature or 0.0
    if temperature < 0:
        raise InvalidRequest("temperature must not be negative", param="temperature")
    return GenerationSettings(
        max_new_tokens=max_tokens,
        temperature=float(temperature),
        top_p=_number(request.sampling, "top_p", float),
        top_k=_number(request.sampling, "top_k", int),
        seed=_number(request.sampling, "seed", int),
        stop=tuple(s for s in request.stop if s),
    )


class EmbeddedExecutor(Executor):
    """Serves the embedded model its tier names; the loaded model is shared by every instance naming it."""

    kind = "embedded"
    supports_tools = False
    # Each piece of text the worker thread hands over is one "read" (`read_done` after it): a relayed stream
    # writes it to the client from the generation's task, in the same trip from the thread.
    flushes_per_read = True

    def __init__(self, tier: str, config: TierConfig, holder: ModelHolder | None = None,
                 data_dir: str | None = None) -> None:
        super().__init__(tier, config)
        self.holder = holder or holder_for(config.model, data_dir, config.threads)
        # Queue of generations: one runs, the rest wait here in arrival order.
        self.generation_limiter = trio.CapacityLimiter(1)
        self._load_finished: trio.Event | None = None

    async def start(self, nursery: trio.Nursery | None = None) -> None:
        """Begin loading the model in a worker thread (when `nursery` is given) and return at once.

        Without a nursery the first request loads the model itself.
        """
        if nursery is None or self.holder.loaded is not None:
            return
        self._load_finished = trio.Event()
        nursery.start_soon(self._load_in_background, self._load_finished)

    async def _load_in_background(self, finished: trio.Event) -> None:
        try:
            # Abandoned on cancel: the load goes on in its thread and the next executor finds it done.
            await trio.to_thread.run_sync(self.holder.load, abandon_on_cancel=True)
        except Exception:
            pass  # the holder keeps the error for status(); each waiting request retries and raises it
        finally:
            finished.set()

    async def _model(self) -> LoadedModel:
        loaded = self.holder.loaded
        if loaded is not None:
            return loaded
        if self._load_finished is not None:
            await self._load_finished.wait()
        # Loaded by now, or it failed: try again (a missing package fails at once with the fix in it).
        return await trio.to_thread.run_sync(self.holder.load, abandon_on_cancel=True)

    async def generate(self, request: ChatRequest, emit: Emit) -> None:
        if needs_tool_calls(request):
            raise ToolCallsUnsupportedLocally(f"{self.holder.name} cannot call tools")
        settings = generation_settings(request, self.config.max_tokens)
        turns = prompt_messages(request.messages)
        loaded = await self._model()

        nowait = getattr(emit, "nowait", None)  # a `NowaitEmit` (the asker's stream, the request's relay)

        async def deliver(event: TextDelta) -> None:
            if nowait is None or not nowait(event):
                await emit(event)
            await read_done(emit)  # never held for the next token: the model may take its time over it

        def send(text: str, logprob: float | None, tokens: int) -> None:
            trio.from_thread.run(deliver, TextDelta(text, logprob=logprob, tokens=tokens))

        def run() -> tuple[FittedPrompt, GenerationResult]:
            fitted = fit_prompt(loaded.estimate_tokens, turns, loaded.context_window, settings.max_new_tokens)
            bounded = replace(settings, max_new_tokens=fitted.max_new_tokens)
            result = generate_blocking(loaded, loaded.render_chat(fitted.turns), bounded, send,
                                       trio.from_thread.check_cancelled)
            return fitted, result

        fitted, result = await trio.to_thread.run_sync(run, limiter=self.generation_limiter,
                                                       abandon_on_cancel=False)
        await emit(Finish(
            reason=result.reason,
            usage=Usage(prompt_tokens=result.prompt_tokens or fitted.tokens,
                        completion_tokens=result.completion_tokens),
            stop_sequence=result.stop_sequence,
            model=self.holder.model.model_id,
        ))

    def context_window(self) -> int | None:
        """The model's window unless the tier says otherwise: the pipeline sends larger requests to other tiers."""
        return self.config.context_window or CONTEXT_WINDOW

    def status(self) -> dict[str, Any]:
        return {
            "model": self.holder.name,
            "loaded": self.holder.loaded is not None,
            "load_seconds": self.holder.load_seconds,
            "error": self.holder.error,
            "generation_pauses": REQUEST_WORK.pauses,  # waits between two tokens for request work
        }

    def model_names(self) -> list[str]:
        return [self.holder.model.model_id]
