"""Work belongs to the asker: generations whose requests left are never started, and their slots come back.

Through the ExecutorActor's door (generations run in the asker's task) with a real loopback upstream and with the
real embedded model; and through a
running daari: a failing status() or a failing generation never cuts another client's stream, and an
executor the supervisor gave up on answers actor_down at once in each protocol's shape.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from actors.executor import ExecutorActor, Generations
from actors.faults import FAULTS
from actors.runtime import Health, Mailbox, RestartPolicy, supervise
from daari.config import TierConfig
from daari.errors import ActorCrashed
from daari.executors.base import Collect, Executor
from daari.executors.embedded import EmbeddedExecutor
from daari.executors.registry import make_executor
from daari.executors.resilience import ResilientExecutor
from daari.protocol.chat import ChatRequest, Message
from daari.protocol.events import Event, Finish, assemble
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

QUEUED = 40


def request(model: str, text: str = "tell me about trio", **sampling: Any) -> ChatRequest:
    return ChatRequest(messages=[Message("user", text)], model=model, sampling=sampling)


class Running:
    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox
        self.generations = Generations()
        self.actor: ExecutorActor | None = None


@asynccontextmanager
async def executor_actor(nursery: trio.Nursery, running: Running, executors: dict[str, Executor]
                         ) -> AsyncIterator[None]:
    def make() -> ExecutorActor:
        running.actor = ExecutorActor(executors, running.generations)
        return running.actor

    await nursery.start(supervise, make, running.mailbox, Health().status("executor"), RestartPolicy())
    yield


async def consume(generations: Generations, tier: str, asked: ChatRequest, events: list[Event] | None = None
                  ) -> None:
    await generations.run(tier, asked, Collect(events if events is not None else []))


async def queue_and_abandon(nursery: trio.Nursery, generations: Generations, tier: str, asked: ChatRequest) -> None:
    """QUEUED requests ask for a generation, wait, and are all cancelled (their clients went away)."""
    async with trio.open_nursery() as askers:
        for _ in range(QUEUED):
            askers.start_soon(consume, generations, tier, asked)
        await trio.testing.wait_all_tasks_blocked()
        askers.cancel_scope.cancel()


async def test_queued_generations_whose_askers_left_never_reach_the_upstream(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        tier = TierConfig(executor="openai", base_url=upstream + "/v1", max_concurrency=1, max_queue=QUEUED)
        executors = {"L3": make_executor("L3", tier)}
        running = Running(Mailbox("executor", 2 * QUEUED, FAULTS))
        async with trio.open_nursery() as nursery:
            # 1. Asked while no run of the actor is up yet (starting, restarting): waiting at its door.
            await queue_and_abandon(nursery, running.generations, "L3", request("good"))
            async with executor_actor(nursery, running, executors):
                actor = running.actor
                assert actor is not None
                # 2. Behind a full tier: one generation holds the only slot, the rest wait for it.
                async with trio.open_nursery() as holder:
                    holder.start_soon(consume, running.generations, "L3", request("hang"))
                    with trio.fail_after(10):
                        while fake.active_streams < 1:
                            await trio.sleep(0.01)
                    await queue_and_abandon(nursery, running.generations, "L3", request("good"))
                    await trio.testing.wait_all_tasks_blocked()  # the cancelled generations unwind
                    assert actor.in_flight["L3"] == 1  # only the holder: the queued ones left the tier
                    holder.cancel_scope.cancel()
                with trio.fail_after(10):
                    while fake.active_streams:
                        await trio.sleep(0.01)
                chats = [r for r in fake.requests if r.path == "/v1/chat/completions"]
                assert [r.body["model"] for r in chats] == ["hang"]  # none of the 2 x 40 queued ones
                assert actor.in_flight["L3"] == 0 and actor.limiters["L3"].borrowed_tokens == 0
                events: list[Event] = []
                with trio.fail_after(10):
                    await consume(running.generations, "L3", request("good"), events)
                assert isinstance(events[-1], Finish) and assemble(events).text
                nursery.cancel_scope.cancel()


async def test_the_embedded_tier_answers_after_its_queued_askers_left() -> None:
    executor = EmbeddedExecutor("L3", TierConfig(executor="embedded", max_tokens=200, max_queue=QUEUED))
    running = Running(Mailbox("executor", 2 * QUEUED, FAULTS))
    long_answer = request("smollm2", "Write a long essay about the sea.", max_tokens=200)
    async with trio.open_nursery() as nursery:
        await queue_and_abandon(nursery, running.generations, "L3", long_answer)
        async with executor_actor(nursery, running, {"L3": executor}):
            actor = running.actor
            assert actor is not None
            async with trio.open_nursery() as holder:
                first = trio.Event()

                class Stalled:
                    """Takes the first piece, then never returns: a client that stopped reading."""

                    async def __call__(self, event: Event) -> None:
                        first.set()
                        await trio.sleep_forever()

                async def hold() -> None:
                    await running.generations.run("L3", long_answer, Stalled())

                holder.start_soon(hold)
                with trio.fail_after(120):  # the model loads on first use
                    await first.wait()
                await queue_and_abandon(nursery, running.generations, "L3", long_answer)
                holder.cancel_scope.cancel()
            events: list[Event] = []
            with trio.fail_after(120):  # an orphaned generation would hold the one slot forever
                await consume(running.generations, "L3", request("smollm2", max_tokens=4), events)
            assert isinstance(events[-1], Finish) and events[-1].usage is not None
            assert actor.in_flight["L3"] == 0 and executor.generation_limiter.borrowed_tokens == 0
            nursery.cancel_scope.cancel()


CHAT = {"model": "good", "messages": [{"role": "user", "content": "tell me about trio"}], "stream": True}


async def read_stream(client: httpx.AsyncClient, body: dict[str, Any], started: trio.Event,
                      out: list[str]) -> None:
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                out.append(line.removeprefix("data:").strip())
                started.set()


async def test_a_failing_status_or_generation_never_cuts_another_clients_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeOpenAI()
    fake.token_delay_s = 0.05  # a stream that lasts while /healthz, /metrics and a failing request happen
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1"),
                                              "L4": upstream_tier("openai", upstream + "/v1")},
                             cache={"l0": {"enabled": False}, "l1": {"enabled": False}})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            lines: list[str] = []
            started = trio.Event()
            async with trio.open_nursery() as streams:
                streams.start_soon(read_stream, client, {**CHAT, "model": "long"}, started, lines)
                with trio.fail_after(10):
                    await started.wait()

                def broken_status(self: Executor) -> dict[str, Any]:
                    raise RuntimeError("status exploded")

                async def broken_generate(self: Executor, request: ChatRequest, emit: Any, *lease: Any) -> None:
                    raise RuntimeError("generation exploded")

                monkeypatch.setattr(ResilientExecutor, "status", broken_status)
                health = await client.get("/healthz")
                metrics = await client.get("/metrics")
                monkeypatch.setattr(ResilientExecutor, "generate", broken_generate)
                monkeypatch.setattr(ResilientExecutor, "generate_leased", broken_generate)  # the actor's call
                failed = await client.post("/v1/chat/completions", json={**CHAT, "stream": False},
                                           headers={"x-daari-tier-override": "L4"})
            restarts = server.parts.health.status("executor").restarts
    assert health.json()["tiers"]["L3"]["error"] == "status failed: RuntimeError"
    assert health.json()["actors"]["executor"]["state"] == "running"
    assert metrics.status_code == 200
    assert failed.status_code == 502 and "RuntimeError" in failed.json()["error"]["message"]
    assert restarts == 0
    assert lines[-1] == "[DONE]"  # the first client's stream ran to its end
    chunks = [json.loads(line) for line in lines[:-1]]
    assert not any("error" in c for c in chunks)
    assert any(c["choices"] and c["choices"][0].get("finish_reason") == "stop" for c in chunks)


async def test_an_executor_given_up_answers_actor_down_at_once_in_each_protocol(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")},
                             actors={"max_restarts": 0})
        async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
            with pytest.raises(ActorCrashed):
                await server.parts.executor.call(object())  # type: ignore[arg-type]  # nobody handles it
            with trio.fail_after(5):
                while server.parts.health.status("executor").state != "failed":
                    await trio.sleep(0.005)
                openai = await client.post("/v1/chat/completions", json={**CHAT, "stream": False})
                anthropic = await client.post("/v1/messages", headers={"anthropic-version": "2023-06-01"}, json={
                    "model": "good", "max_tokens": 20, "messages": [{"role": "user", "content": "hi there"}]})
                health = await client.get("/healthz")
    assert openai.status_code == 503
    assert openai.json()["error"]["code"] == "actor_down"
    assert "GET /healthz" in openai.json()["error"]["message"]
    assert anthropic.status_code == 529 and anthropic.json()["error"]["type"] == "overloaded_error"
    assert "GET /healthz" in anthropic.json()["error"]["message"]
    assert health.status_code == 503 and health.json()["actors"]["executor"]["state"] == "failed"
