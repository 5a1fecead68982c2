"""A live stream written as the executor reads (the request's relay is the generation's emit): the events reach
the relay in runs, one per upstream read; an asker that leaves while the relay waits on its client ends the
generation, frees the slot and closes the upstream; a failed client write is the client's side; the idle timeout
does not count the client's write. Through the ExecutorActor's door (`Generations`) with a real loopback upstream,
and the resilience wrapper with scripted executors on virtual time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from actors.executor import ExecutorActor, Generations
from actors.faults import FAULTS
from actors.runtime import Health, Mailbox, RestartPolicy, supervise
from daari.config import TierConfig
from daari.errors import UpstreamError, UpstreamTimeout
from daari.executors.base import DownstreamFailed, Emit, Executor, read_done
from daari.executors.registry import make_executor
from daari.executors.resilience import ResilientExecutor
from daari.pipeline.live_relay import LiveRelay
from daari.pipeline.turn import Turn
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import Event, Finish, KeepAlive, TextDelta, assemble
from daari.protocol.wire import OPENAI
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.test_resilience import IDLE, REQUEST, ScriptedExecutor, tier_config


class ClientRelay:
    """Stands in for the request's `LiveRelay` (daari/pipeline/live_relay.py) at the client's end: `nowait` keeps
    an event, `flush` writes what was kept as one write (recorded), taking `delay` (a slow client), forever with
    `block`, or failing with `fails` (as the live relay does: `DownstreamFailed` from the sink's error)."""

    def __init__(self, delay: float = 0.0, block: bool = False, fails: Exception | None = None) -> None:
        self.delay = delay
        self.block = block
        self.fails = fails
        self.kept: list[Event] = []
        self.writes: list[list[Event]] = []
        self.blocked = trio.Event()

    def nowait(self, event: Event) -> bool:
        self.kept.append(event)
        return True

    async def __call__(self, event: Event) -> None:
        self.nowait(event)
        await self.flush()

    async def flush(self) -> None:
        if not self.kept:
            return
        if self.fails is not None:
            raise DownstreamFailed("writing to the client failed") from self.fails
        if self.block:
            self.blocked.set()
            await trio.sleep_forever()
        await trio.sleep(self.delay)
        events, self.kept = self.kept, []
        self.writes.append(events)

    @property
    def events(self) -> list[Event]:
        return [event for write in self.writes for event in write]


def chat(model: str, **sampling: object) -> ChatRequest:
    return ChatRequest(messages=[Message("user", "tell me about trio")], model=model, stream=True,
                       sampling=dict(sampling))


@asynccontextmanager
async def executor_actor(executors: dict[str, Executor]) -> AsyncIterator[tuple[Generations, list[ExecutorActor]]]:
    """A supervised ExecutorActor and its door, as daari runs them (server/actor_table.py)."""
    mailbox = Mailbox("executor", 16, FAULTS)
    generations = Generations()
    made: list[ExecutorActor] = []

    def make() -> ExecutorActor:
        made.append(ExecutorActor(executors, generations))
        return made[-1]

    async with trio.open_nursery() as nursery:
        await nursery.start(supervise, make, mailbox, Health().status("executor"), RestartPolicy())
        yield generations, made
        nursery.cancel_scope.cancel()


async def through_stream(generations: Generations, tier: str, request: ChatRequest, relay: ClientRelay) -> None:
    """A live generation: the relay is its emit, in this task."""
    await generations.run(tier, request, relay)


async def test_a_relayed_generation_writes_through_the_relay_in_runs() -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        executors = {"L3": make_executor("L3", TierConfig(executor="openai", base_url=upstream + "/v1"))}
        assert executors["L3"].flushes_per_read  # the resilience wrapper presents its inner executor's flag
        async with executor_actor(executors) as (generations, _):
            relay = ClientRelay()
            with trio.fail_after(10):
                await through_stream(generations, "L3", chat("long", max_tokens=30), relay)
    assert isinstance(relay.events[-1], Finish) and len(assemble(relay.events).text.split()) == 30
    assert not relay.kept  # the last events were written before the stream ended
    assert 1 <= len(relay.writes) <= len(relay.events)  # in runs, never an event held back


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_paced_relayed_stream_is_written_event_by_event_never_held_for_a_later_read(kind: str) -> None:
    """Each upstream event arrives alone, so each is written before the next arrives: an executor that marks its
    reads but missed one would hold events until a later read (or the end) and make fewer writes."""
    fake: FakeOpenAI | FakeAnthropic = FakeOpenAI() if kind == "openai" else FakeAnthropic()
    fake.token_delay_s = 0.05
    async with serve_app(fake) as upstream:
        executors = {"L3": make_executor("L3", TierConfig(executor=kind, base_url=upstream + "/v1"))}
        async with executor_actor(executors) as (generations, _):
            relay = ClientRelay()
            with trio.fail_after(10):
                await through_stream(generations, "L3", chat("long", max_tokens=6), relay)
    assert isinstance(relay.events[-1], Finish)
    deltas = [event for event in relay.events if isinstance(event, TextDelta)]
    assert len(deltas) == 6
    assert len(relay.writes) >= len(deltas)  # no two paced deltas in one write


async def test_a_relayed_upstream_failure_writes_what_came_before_it_then_reports_it() -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        executors = {"L3": make_executor("L3", TierConfig(executor="openai", base_url=upstream + "/v1"))}
        async with executor_actor(executors) as (generations, _):
            relay = ClientRelay()
            with trio.fail_after(10), pytest.raises(UpstreamError):
                await through_stream(generations, "L3", chat("drop"), relay)
    assert relay.events and not relay.kept  # the two chunks before the break reached the client first
    assert not isinstance(relay.events[-1], Finish)


async def test_an_asker_gone_while_the_relay_waits_on_its_client_closes_the_upstream_and_frees_the_slot() -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        tier = TierConfig(executor="openai", base_url=upstream + "/v1", max_concurrency=1)
        executors = {"L3": make_executor("L3", tier)}
        async with executor_actor(executors) as (generations, made):
            relay = ClientRelay(block=True)  # the client stopped reading: its write never returns
            with trio.fail_after(10):
                async with trio.open_nursery() as asker:
                    asker.start_soon(through_stream, generations, "L3", chat("long", max_tokens=50), relay)
                    await relay.blocked.wait()
                    assert fake.active_streams == 1
                    asker.cancel_scope.cancel()  # the client watch cancels the request: it leaves the stream
                while fake.active_streams:
                    await trio.sleep(0.01)
            actor = made[-1]
            assert actor.in_flight["L3"] == 0 and actor.limiters["L3"].borrowed_tokens == 0
            after = ClientRelay()
            with trio.fail_after(10):
                await through_stream(generations, "L3", chat("good"), after)
            assert isinstance(after.events[-1], Finish)  # the slot came back: the next one answers


async def test_a_failed_client_write_is_the_clients_side_not_the_upstreams() -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        executors = {"L3": make_executor("L3", TierConfig(executor="openai", base_url=upstream + "/v1"))}
        async with executor_actor(executors) as (generations, _):
            gone = ConnectionResetError("the client reset the connection")
            with trio.fail_after(10), pytest.raises(DownstreamFailed) as info:
                await through_stream(generations, "L3", chat("long"), ClientRelay(fails=gone))
            assert not isinstance(info.value, UpstreamError)  # the request's task raises the relay's own error
            assert executors["L3"].status()["breaker"]["consecutive_failures"] == 0
            while fake.active_streams:
                await trio.sleep(0.01)


async def test_an_executor_that_does_not_mark_its_reads_has_each_event_written_as_it_comes() -> None:
    """With no channel between the executor and the relay there is nothing to batch events in: an executor that
    does not mark its reads is handed the relay's call, which writes each event at once."""
    async def answer(emit: Emit) -> None:
        await emit(TextDelta("a"))
        await emit(Finish("stop"))

    executors: dict[str, Executor] = {"L4": ResilientExecutor(ScriptedExecutor(tier_config(), answer))}
    assert not executors["L4"].flushes_per_read
    async with executor_actor(executors) as (generations, _):
        relay = ClientRelay()
        with trio.fail_after(10):
            await through_stream(generations, "L4", REQUEST, relay)
    assert relay.writes == [[TextDelta("a")], [Finish("stop")]]


class RecordingSink:
    """The pipeline's `Sink` at the client's end: what was sent, in order; `fails`: the next write raises it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self.fails: Exception | None = None
        self._opened = False

    @property
    def stream_opened(self) -> bool:
        return self._opened

    async def send_json(self, status: int, body: dict[str, object], headers: dict[str, str]) -> None:
        raise AssertionError("a live stream sends no JSON body")

    async def open_stream(self, headers: dict[str, str]) -> None:
        self._opened = True
        self.sent.append(("start", b""))

    async def write(self, chunks: list[bytes]) -> None:
        if self.fails is not None:
            raise self.fails
        self.sent.append(("body", b"".join(chunks)))

    async def close_stream(self, chunks: Sequence[bytes] = ()) -> None:
        self.sent.append(("end", b"".join(chunks)))


def live_turn(sink: RecordingSink) -> Turn:
    turn = Turn(OPENAI, {}, b"{}", sink)
    turn.request = chat("m")
    return turn


async def test_the_live_relay_opens_the_stream_with_its_first_run_in_one_write() -> None:
    sink = RecordingSink()
    turn = live_turn(sink)
    first: list[str] = []
    relay = LiveRelay(turn, "L3", "openai", None, lambda: first.append("dropped tools settled"))
    assert relay.nowait(TextDelta("Hello")) and relay.nowait(TextDelta(" world"))
    assert sink.sent == [] and turn.meta.tier == "L3" and first == ["dropped tools settled"]
    await relay.flush()
    await relay.flush()  # nothing kept: nothing written
    await relay(TextDelta("!"))  # awaited: written at once
    assert [kind for kind, _ in sink.sent] == ["start", "body", "body"]
    opening = sink.sent[1][1]
    assert opening.index(b'"role":"assistant"') < opening.index(b"Hello") < opening.index(b" world")
    assert b'"content":"!"' in sink.sent[2][1] and first == ["dropped tools settled"]  # settled once
    assert relay.events == [TextDelta("Hello"), TextDelta(" world"), TextDelta("!")]


async def test_the_live_relay_carries_a_failed_write_as_downstream_failed_and_keeps_the_error() -> None:
    sink = RecordingSink()
    relay = LiveRelay(live_turn(sink), "L3", "openai", None, lambda: None)
    sink.fails = gone = ConnectionResetError("reset")
    relay.nowait(TextDelta("a"))
    with pytest.raises(DownstreamFailed) as info:
        await relay.flush()
    assert relay.failure is gone and info.value.__cause__ is gone
    assert relay.events == [TextDelta("a")]  # rendered before the write: the budget and the tail still see it


class MarkingExecutor(ScriptedExecutor):
    flushes_per_read = True


@pytest.fixture
def virtual_time(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    mock_clock.autojump_threshold = 0
    return mock_clock


async def test_a_prepared_relay_opens_with_the_renderer_it_built_and_the_same_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`prepare` (the upstream's head is in) builds the renderer and its opening ahead of the first event; the
    stream then written is byte for byte the one a relay that built them at its first event writes, its response
    id aside (taken from the same counter, earlier). Nothing is written or settled by `prepare` itself."""
    monkeypatch.setattr("time.time", lambda: 1_700_000_000.5)  # both streams in one second
    streams = []
    for prepared in (False, True):
        sink = RecordingSink()
        turn = live_turn(sink)
        relay = LiveRelay(turn, "L3", "openai", None, lambda: None)
        if prepared:
            relay.prepare()
            relay.prepare()  # a second head-in signal (a retried attempt's) changes nothing
            assert sink.sent == [] and turn.meta.tier is None and turn.renderer is None
        relay.nowait(TextDelta("Hello"))
        await relay.flush()
        assert turn.renderer is not None
        streams.append((turn.renderer.response_id, sink.sent))  # type: ignore[attr-defined]
    (built_id, built), (prepared_id, sent) = streams
    assert prepared_id != built_id
    assert [(kind, data.replace(prepared_id.encode(), built_id.encode())) for kind, data in sent] == built


async def test_a_prepared_renderer_from_an_earlier_second_is_built_again_at_the_first_event(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A renderer stamps its creation in whole seconds (OpenAI's `created`): one prepared in a second the clock
    has left is not used, so the stream carries the first event's second, as before."""
    now = [1_700_000_000.2]
    monkeypatch.setattr("time.time", lambda: now[0])
    sink = RecordingSink()
    turn = live_turn(sink)
    relay = LiveRelay(turn, "L3", "openai", None, lambda: None)
    relay.prepare()
    now[0] += 1.0
    relay.nowait(TextDelta("Hello"))
    await relay.flush()
    assert b'"created":1700000001' in sink.sent[1][1] and b"1700000000" not in sink.sent[1][1]


async def test_prepare_after_the_first_event_changes_nothing() -> None:
    sink = RecordingSink()
    turn = live_turn(sink)
    relay = LiveRelay(turn, "L3", "openai", None, lambda: None)
    relay.nowait(TextDelta("a"))
    renderer = turn.renderer
    relay.prepare()
    relay.nowait(TextDelta("b"))
    await relay.flush()
    assert turn.renderer is renderer and [kind for kind, _ in sink.sent] == ["start", "body"]


class PreparedRelay(ClientRelay):
    """A `ClientRelay` that notes when `prepare` is called, against the events kept by then."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared: list[int] = []

    def prepare(self) -> None:
        self.prepared.append(len(self.kept) + len(self.events))


async def test_the_wrapper_prepares_the_relay_once_when_the_upstream_head_is_in(virtual_time: object) -> None:
    """`response_started` (a `KeepAlive` before the body) is the upstream accepting the request: the relay is told
    then, before any event, and not again for later keep-alives (pings, a role-only chunk)."""
    async def head_then_reads(emit: Emit) -> None:
        await emit(KeepAlive())  # the response head (http_upstream.response_started)
        await emit(KeepAlive())  # the upstream's own keep-alive
        await emit(TextDelta("a"))
        await read_done(emit)
        await emit(KeepAlive())
        await emit(Finish("stop"))
        await read_done(emit)

    relay = PreparedRelay()
    await ResilientExecutor(MarkingExecutor(tier_config(), head_then_reads)).generate(REQUEST, relay)
    assert relay.prepared == [0]
    assert relay.writes == [[TextDelta("a")], [Finish("stop")]]


async def test_a_relay_write_that_waits_on_the_client_is_not_upstream_idle(virtual_time: object) -> None:
    async def reads(emit: Emit) -> None:
        await emit(TextDelta("a"))
        await emit(TextDelta("b"))
        await read_done(emit)  # one read's two events: one write
        await trio.sleep(IDLE * 0.8)
        await emit(TextDelta("c"))
        await emit(Finish("stop"))
        await read_done(emit)

    slow_client = ClientRelay(delay=IDLE * 3)  # each write outlasts idle_s
    executor = ResilientExecutor(MarkingExecutor(tier_config(), reads))
    await executor.generate(REQUEST, slow_client)
    assert slow_client.writes == [[TextDelta("a"), TextDelta("b")], [TextDelta("c"), Finish("stop")]]


async def test_after_a_relay_write_the_upstream_gets_idle_s_again(virtual_time: object) -> None:
    async def one_read_then_silence(emit: Emit) -> None:
        await emit(TextDelta("a"))
        await read_done(emit)
        await trio.sleep_forever()

    client = ClientRelay(delay=IDLE / 2)
    executor = ResilientExecutor(MarkingExecutor(tier_config(), one_read_then_silence))
    start = trio.current_time()
    with pytest.raises(UpstreamTimeout, match="idle"):
        await executor.generate(REQUEST, client)
    assert trio.current_time() - start == pytest.approx(IDLE / 2 + IDLE)  # the write's time, then idle_s
    assert client.writes == [[TextDelta("a")]]
    assert executor.status()["breaker"]["consecutive_failures"] == 1  # the upstream's silence: its fault


async def test_a_failed_relay_write_is_not_retried_nor_counted_against_the_upstream(virtual_time: object) -> None:
    async def one_read(emit: Emit) -> None:
        await emit(TextDelta("a"))
        await read_done(emit)
        await emit(Finish("stop"))

    inner = MarkingExecutor(tier_config(max_retries=2), one_read)
    executor = ResilientExecutor(inner)
    with pytest.raises(DownstreamFailed):
        await executor.generate(REQUEST, ClientRelay(fails=BrokenPipeError()))
    assert inner.calls == 1
    assert executor.status()["breaker"]["consecutive_failures"] == 0


async def test_a_paced_ollama_stream_is_relayed_line_by_line_never_held_for_a_later_read() -> None:
    """The Ollama executor marks its reads of the NDJSON stream: each paced line is written before the next
    arrives (an executor that missed a `read_done` would hold the lines until the end: one write)."""
    fake = FakeOllama()
    fake.token_delay_s = 0.05
    async with serve_app(fake) as upstream:
        executors = {"L2": make_executor("L2", TierConfig(executor="ollama", base_url=upstream))}
        assert executors["L2"].flushes_per_read
        async with executor_actor(executors) as (generations, _):
            relay = ClientRelay()
            with trio.fail_after(10):
                await through_stream(generations, "L2", chat("good"), relay)
    assert isinstance(relay.events[-1], Finish)
    assert assemble(relay.events).text == "Hello there!"
    deltas = [event for event in relay.events if isinstance(event, TextDelta)]
    assert len(deltas) == 3
    assert len(relay.writes) >= len(deltas)  # no two paced lines in one write
    assert not relay.kept


async def test_an_ollama_stream_whose_asker_left_while_its_client_write_waits_is_cut_and_frees_the_slot() -> None:
    fake = FakeOllama()
    fake.token_delay_s = 0.02  # "hermes" streams ~100 lines, one character each: still streaming when cut
    async with serve_app(fake) as upstream:
        tier = TierConfig(executor="ollama", base_url=upstream, max_concurrency=1, tool_repair="off")
        executors = {"L2": make_executor("L2", tier)}
        async with executor_actor(executors) as (generations, made):
            relay = ClientRelay(block=True)  # the client stopped reading: its write never returns
            with trio.fail_after(10):
                async with trio.open_nursery() as asker:
                    asker.start_soon(through_stream, generations, "L2", chat("hermes"), relay)
                    await relay.blocked.wait()
                    asker.cancel_scope.cancel()  # the client watch cancels the request: it leaves the stream
                await fake.client_closed.wait()  # the upstream stream was cut, not read to its end
            assert fake.streams_closed_by_client == 1
            actor = made[-1]
            assert actor.in_flight["L2"] == 0 and actor.limiters["L2"].borrowed_tokens == 0
            after = ClientRelay()
            with trio.fail_after(10):
                await through_stream(generations, "L2", chat("good"), after)
            assert assemble(after.events).text == "Hello there!"  # the slot came back: the next one answers


async def test_an_ollama_error_after_relayed_lines_writes_them_then_reports_it() -> None:
    fake = FakeOllama()
    async with serve_app(fake) as upstream:
        executors = {"L2": make_executor("L2", TierConfig(executor="ollama", base_url=upstream))}
        async with executor_actor(executors) as (generations, _):
            relay = ClientRelay()
            with trio.fail_after(10), pytest.raises(UpstreamError, match="mid-stream"):
                await through_stream(generations, "L2", chat("stream_error"), relay)
    assert [type(event) for event in relay.events] == [TextDelta] and not relay.kept  # "Hel", written first
    assert assemble([*relay.events, Finish("stop")]).text == "Hel"
