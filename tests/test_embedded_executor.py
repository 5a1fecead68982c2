"""The embedded executor on the real default embedded model (loaded once per session), and its pure helpers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio
import trio.testing

from daari.config import TierConfig
from daari.errors import InvalidRequest, ModelNotInstalled, ToolCallsUnsupportedLocally
from daari.executors.base import Executor
from daari.executors.embedded import (
    IMAGE_NOTE,
    EmbeddedExecutor,
    fit_prompt,
    generation_settings,
    prompt_messages,
)
from daari.executors.embedded_model import (
    EMBEDDED,
    LoadedModel,
    ModelHolder,
    StopSequenceBuffer,
)
from daari.models import EmbeddedModel, ModelPackage
from daari.protocol.chat import ChatRequest, Completion, Message, Tool, ToolCall
from daari.protocol.events import Event, Finish, TextDelta, assemble
from tests.test_live_relay import ClientRelay, executor_actor, through_stream

QUESTION = "What is the capital of France? Answer in one sentence."


@pytest.fixture(scope="session")
def loaded_model() -> LoadedModel:
    return EMBEDDED.load()


@pytest.fixture
def executor(loaded_model: LoadedModel) -> EmbeddedExecutor:
    return EmbeddedExecutor("L3", TierConfig(max_tokens=24))


def ask(text: str = QUESTION, **sampling: Any) -> ChatRequest:
    return ChatRequest(messages=[Message("user", text)], model="anything", sampling=sampling)


async def run(executor: EmbeddedExecutor, request: ChatRequest) -> tuple[list[Event], Completion]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    await executor.generate(request, emit)
    return events, assemble(events)


# --- pure helpers -------------------------------------------------------------------------------------


def test_prompt_messages_render_tool_history_and_images_as_text() -> None:
    messages = [
        Message("system", "Be brief."),
        Message("user", [{"type": "text", "text": "What is in this picture?"},
                         {"type": "image", "media_type": "image/png", "data": "AAAA"}]),
        Message("assistant", "Let me look.", tool_calls=[ToolCall("call_1", "read_file", '{"path": "a.py"}')]),
        Message("tool", "print('hi')", tool_call_id="call_1"),
        Message("tool", "no such file", tool_call_id="call_2", name="open", is_error=True),
    ]
    turns = prompt_messages(messages)
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "user", "user"]
    assert turns[1]["content"] == f"What is in this picture?\n{IMAGE_NOTE}"
    assert turns[2]["content"] == 'Let me look.\n[called tool read_file with arguments {"path": "a.py"}]'
    assert turns[3]["content"] == "[result of tool read_file]\nprint('hi')"
    assert turns[4]["content"] == "[error from tool open]\nno such file"


def _char_count(turns: list[dict[str, str]]) -> int:
    """A fake token count: one token per character of content, plus two per turn."""
    return sum(len(t["content"]) + 2 for t in turns)


def test_fit_prompt_keeps_everything_that_fits() -> None:
    turns = [{"role": "user", "content": "x" * 10}]
    fitted = fit_prompt(_char_count, turns, window=100, max_new_tokens=20)
    assert (fitted.tokens, fitted.max_new_tokens, fitted.dropped_messages) == (12, 20, 0)


def test_fit_prompt_drops_oldest_non_system_turns_first() -> None:
    turns = [{"role": "system", "content": "s" * 8}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": str(i) * 18} for i in range(6)
    ]
    # Each turn costs 20, the system 10: a budget of 100 - 25 = 75 holds the system and three turns.
    fitted = fit_prompt(_char_count, turns, window=100, max_new_tokens=25)
    assert fitted.dropped_messages == 3
    assert fitted.tokens == 70
    assert [t["content"][0] for t in fitted.turns] == ["s", "3", "4", "5"]
    assert fitted.max_new_tokens == 25


def test_fit_prompt_refuses_when_system_and_last_message_overflow_the_window() -> None:
    turns = [{"role": "system", "content": "s" * 50}, {"role": "user", "content": "u" * 60}]
    with pytest.raises(InvalidRequest) as caught:
        fit_prompt(_char_count, turns, window=100, max_new_tokens=10)
    assert caught.value.code == "context_length_exceeded"


def test_fit_prompt_shortens_the_answer_to_what_the_window_leaves() -> None:
    turns = [{"role": "user", "content": "u" * 88}]
    fitted = fit_prompt(_char_count, turns, window=100, max_new_tokens=32000)
    assert fitted.max_new_tokens == 10


def test_generation_settings_are_greedy_unless_the_client_sets_a_temperature() -> None:
    assert generation_settings(ask(), 512).temperature == 0.0
    assert generation_settings(ask(), 512).max_new_tokens == 512
    sampled = ChatRequest(messages=[], model="m", temperature=0.7,
                          sampling={"top_p": 0.9, "top_k": 40, "seed": 3, "max_tokens": 9, "stop": "END"})
    settings = generation_settings(sampled, 512)
    assert (settings.temperature, settings.top_p, settings.top_k, settings.seed) == (0.7, 0.9, 40, 3)
    assert (settings.max_new_tokens, settings.stop) == (9, ("END",))
    with pytest.raises(InvalidRequest):
        generation_settings(ask(max_tokens=0), 512)
    with pytest.raises(InvalidRequest):
        generation_settings(ask(top_p="high"), 512)


def test_stop_buffer_holds_back_a_possible_start_and_cuts_at_the_match() -> None:
    buffer = StopSequenceBuffer(["</end>"])
    assert buffer.push("hello </") == "hello "
    assert buffer.push("e") == ""
    assert buffer.push("x") == "</ex"
    assert buffer.push(" and </en") == " and "
    assert buffer.push("d> ignored") == ""
    assert buffer.matched == "</end>"
    assert buffer.push("more") == ""


def test_stop_buffer_takes_the_earliest_of_several_stops_and_flushes_at_the_end() -> None:
    buffer = StopSequenceBuffer(["BB", "A"])
    assert buffer.push("xxBBA") == "xx"
    assert buffer.matched == "BB"
    tail = StopSequenceBuffer(["STOP"])
    assert tail.push("almost ST") == "almost "
    assert tail.flush() == "ST"


# --- the real model -----------------------------------------------------------------------------------


async def test_greedy_answer_has_text_usage_logprobs_and_model(executor: EmbeddedExecutor) -> None:
    events, completion = await run(executor, ask())
    assert "Paris" in completion.text
    assert isinstance(events[-1], Finish)
    assert completion.usage.prompt_tokens > 10
    assert 0 < completion.usage.completion_tokens <= 24
    assert completion.model == EMBEDDED.model.model_id
    assert completion.mean_logprob is not None and completion.mean_logprob < 0
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert all(d.tokens >= 1 and d.logprob is not None and d.logprob <= 0 for d in deltas)
    assert sum(d.tokens for d in deltas) <= completion.usage.completion_tokens


async def test_greedy_is_deterministic(executor: EmbeddedExecutor) -> None:
    request = ask("Name three colors.", max_tokens=12)
    _, first = await run(executor, request)
    _, second = await run(executor, request)
    assert first.text and first.text == second.text


async def test_seeded_sampling_repeats_and_differs_from_another_seed(executor: EmbeddedExecutor) -> None:
    def sampled(seed: int) -> ChatRequest:
        return ChatRequest(messages=[Message("user", "Tell me a story about a cat.")], model="m",
                           temperature=1.5, sampling={"max_tokens": 12, "seed": seed})

    _, one = await run(executor, sampled(1))
    _, again = await run(executor, sampled(1))
    _, other = await run(executor, sampled(2))
    assert one.text == again.text
    assert one.text != other.text


async def test_max_tokens_gives_finish_length(executor: EmbeddedExecutor) -> None:
    _, completion = await run(executor, ask("Write a long essay about the sea.", max_tokens=5))
    assert completion.finish_reason == "length"
    assert completion.usage.completion_tokens == 5


async def test_stop_sequence_truncates_the_text(executor: EmbeddedExecutor) -> None:
    _, full = await run(executor, ask(max_tokens=24))
    words = full.text.split(" ")
    assert len(words) >= 4
    stop = " " + words[3]
    _, cut = await run(executor, ask(max_tokens=24, stop=[stop, "never appears"]))
    assert cut.text == full.text[: full.text.index(stop)]
    assert cut.finish_reason == "stop_sequence"
    assert cut.stop_sequence == stop


async def test_history_with_tool_calls_still_answers(executor: EmbeddedExecutor) -> None:
    request = ChatRequest(model="m", sampling={"max_tokens": 8}, messages=[
        Message("user", "What is in a.py?"),
        Message("assistant", None, tool_calls=[ToolCall("c1", "read_file", '{"path": "a.py"}')]),
        Message("tool", "print('hi')", tool_call_id="c1"),
    ])
    events, completion = await run(executor, request)
    assert completion.text
    assert completion.usage.completion_tokens > 0


async def test_tools_in_the_request_are_refused(executor: EmbeddedExecutor) -> None:
    request = ask()
    request.tools = [Tool("read_file", None, {"type": "object"})]
    with pytest.raises(ToolCallsUnsupportedLocally):
        await run(executor, request)


async def test_cancelling_after_the_first_delta_stops_the_thread_and_frees_the_limiter(
    executor: EmbeddedExecutor,
) -> None:
    deltas: list[TextDelta] = []
    with trio.CancelScope() as scope:
        async def emit(event: Event) -> None:
            if isinstance(event, TextDelta):
                deltas.append(event)
                scope.cancel()

        await executor.generate(ask("Write a long essay about the sea.", max_tokens=200), emit)
    assert scope.cancelled_caught
    assert len(deltas) == 1
    assert executor.generation_limiter.borrowed_tokens == 0
    # The next generation runs to its end on the same model: a thread that had ignored the cancel would
    # still be emitting into `deltas` meanwhile (no wall-clock wait needed to see it).
    _, next_answer = await run(executor, ask(max_tokens=4))
    assert next_answer.usage.completion_tokens > 0
    assert len(deltas) == 1


async def test_a_second_request_waits_for_the_first_to_finish(executor: EmbeddedExecutor) -> None:
    log: list[str] = []
    first_is_running = trio.Event()
    second_is_queued = trio.Event()

    def recorder(name: str):  # type: ignore[no-untyped-def]
        async def emit(event: Event) -> None:
            if name == "first" and not log:
                first_is_running.set()  # its first token: it holds the generation slot
                await second_is_queued.wait()  # hold the first generation until the second is queued
            log.append(f"{name}:{type(event).__name__}")
        return emit

    async with trio.open_nursery() as nursery:
        nursery.start_soon(executor.generate, ask(max_tokens=6), recorder("first"))
        await first_is_running.wait()
        assert executor.generation_limiter.borrowed_tokens == 1
        nursery.start_soon(executor.generate, ask(max_tokens=6), recorder("second"))
        await trio.testing.wait_all_tasks_blocked()  # the second has reached the slot and waits for it
        assert executor.generation_limiter.statistics().tasks_waiting == 1
        second_is_queued.set()
    first_finish = log.index("first:Finish")
    assert log.index("second:TextDelta") > first_finish
    assert all(entry.startswith("first") for entry in log[: first_finish + 1])


async def test_the_loaded_model_is_shared_by_new_executors(loaded_model: LoadedModel) -> None:
    fresh = EmbeddedExecutor("L3", TierConfig())
    status = fresh.status()
    assert status["loaded"] is True
    assert status["error"] is None
    assert isinstance(status["load_seconds"], float)
    assert fresh.model_names() == [EMBEDDED.model.model_id]
    async with trio.open_nursery() as nursery:
        await fresh.start(nursery)  # nothing to load: starts no task
        assert not nursery.child_tasks


class _GatedHolder(ModelHolder):
    """The real model behind a gate the test opens: a load that takes as long as the test says."""

    def __init__(self) -> None:
        super().__init__(EMBEDDED.model)
        self.gate = threading.Event()
        self._ready: LoadedModel | None = None

    @property
    def loaded(self) -> LoadedModel | None:
        return self._ready

    def load(self) -> LoadedModel:
        self.gate.wait()
        self._ready = EMBEDDED.load()
        return self._ready


async def test_requests_before_the_model_is_ready_wait_for_it(loaded_model: LoadedModel) -> None:
    holder = _GatedHolder()
    executor = EmbeddedExecutor("L3", TierConfig(max_tokens=4), holder=holder)
    results: list[Completion] = []

    async def request() -> None:
        results.append((await run(executor, ask()))[1])

    async with trio.open_nursery() as nursery:
        await executor.start(nursery)
        nursery.start_soon(request)
        nursery.start_soon(request)
        await trio.testing.wait_all_tasks_blocked()  # both are waiting: for the load, behind the gate
        assert results == []
        assert executor.status()["loaded"] is False
        holder.gate.set()
    assert len(results) == 2 and all(r.usage.completion_tokens > 0 for r in results)


async def test_a_missing_package_fails_waiting_requests_with_the_install_command() -> None:
    missing = ModelPackage("embedded model", "llm-nothing", "9.9", "daari_test_no_such_package", "m.gguf")
    executor = EmbeddedExecutor("L3", TierConfig(), holder=ModelHolder(
        EmbeddedModel("nothing", "Nothing", (missing,), "0" * 64, 1)))
    async with trio.open_nursery() as nursery:
        await executor.start(nursery)
        with pytest.raises(ModelNotInstalled, match=r"install --no-deps llm-nothing==9\.9`$"):
            await run(executor, ask())
    status = executor.status()
    assert status["loaded"] is False
    assert "llm-nothing is not installed" in status["error"]


def test_llama_cpps_own_http_port_refuses_every_other_local_process(loaded_model: LoadedModel) -> None:
    import httpx

    address = loaded_model.server.listening_address
    assert address.startswith("http://127.0.0.1:")
    with httpx.Client(timeout=30) as client:
        for path in ("/v1/models", "/slots", "/completion", "/v1/chat/completions"):
            assert client.post(address + path, json={"prompt": "hi"}).status_code == 401, path
        assert client.get(address + "/health").status_code == 200  # the only open door, and it tells nothing


# --- the live relay (daari/pipeline/live_relay.py) from the generation's task ----------------------------


async def test_a_relayed_embedded_stream_writes_each_piece_before_the_model_makes_the_next(
    loaded_model: LoadedModel,
) -> None:
    """Each piece of text the worker thread hands over is written at once: a missed `read_done` would keep every
    piece until the generation ended (one write)."""
    executors: dict[str, Executor] = {"L1": EmbeddedExecutor("L1", TierConfig(max_tokens=8))}
    assert executors["L1"].flushes_per_read
    async with executor_actor(executors) as (generations, _):
        relay = ClientRelay()
        with trio.fail_after(120):
            await through_stream(generations, "L1", ask(), relay)
    assert isinstance(relay.events[-1], Finish) and not relay.kept
    deltas = [event for event in relay.events if isinstance(event, TextDelta)]
    assert len(deltas) >= 2
    assert len(relay.writes) >= len(deltas)  # each piece its own write


async def test_a_relayed_embedded_stream_whose_asker_left_while_its_write_waits_stops_the_model(
    loaded_model: LoadedModel,
) -> None:
    executor = EmbeddedExecutor("L1", TierConfig(max_tokens=200))
    async with executor_actor({"L1": executor}) as (generations, made):
        relay = ClientRelay(block=True)  # the client stopped reading: the first piece's write never returns
        with trio.fail_after(120):
            async with trio.open_nursery() as asker:
                asker.start_soon(through_stream, generations, "L1", ask("Write a long essay about the sea."), relay)
                await relay.blocked.wait()
                asker.cancel_scope.cancel()  # the client watch cancels the request: it leaves the stream
            while made[-1].in_flight["L1"]:
                await trio.sleep(0.01)
        assert executor.generation_limiter.borrowed_tokens == 0  # the worker thread stopped, the model is free
        after = ClientRelay()
        with trio.fail_after(120):
            await through_stream(generations, "L1", ask(max_tokens=4), after)
        assert isinstance(after.events[-1], Finish) and relay.writes == []
