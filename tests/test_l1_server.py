"""L1 through a running daari: verified paraphrase hits, rejected near-misses, agent prefixes, both protocols.

Real loopback HTTP, a fake OpenAI upstream as L3, the real embedding model and SQLite.
"""

import json
from pathlib import Path
from typing import Any

import httpx
import trio

from actors.semantic_cache import L1Count
from daari.pipeline.steps.l1 import SemanticTier
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier

ORIGINAL = "How do I list Docker containers?"
PARAPHRASE = "Show me the command to list docker containers"
NEAR_MISS = "How do I list Docker images?"


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "good", "messages": [{"role": "user", "content": text}], **extra}


async def ready(server: Any) -> SemanticTier:
    tier = server.parts.shortcuts["L1"]
    assert isinstance(tier, SemanticTier)
    with trio.fail_after(60):
        await tier.status.started.wait()
    assert tier.status.ready
    return tier


async def settle(server: Any, tier: SemanticTier, entries: int) -> None:
    """Wait until L1 holds `entries` (remember runs after the response)."""
    with trio.fail_after(10):
        while await tier.cache.call(L1Count()) < entries:
            await trio.sleep(0.01)


def config(tmp_path: Path, upstream: str, **l1: Any) -> Any:
    return make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")}, cache={"l1": l1})


async def test_paraphrase_is_served_from_l1_and_near_miss_is_rejected(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(config(tmp_path, upstream)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        tier = await ready(server)
        first = (await client.post("/v1/chat/completions", json=chat(ORIGINAL))).json()
        assert first["daari_meta"]["tier"] == "L3"
        assert first["daari_meta"]["l1"] == "miss"  # looked up: its context held no entry yet
        await settle(server, tier, 1)
        upstream_calls = len(fake.requests)

        served = await client.post("/v1/chat/completions", json=chat(PARAPHRASE))
        hit = served.json()
        meta = hit["daari_meta"]
        assert meta["tier"] == "L1" and meta["task_type"] == "cache_hit"
        # a semantic match is a cache hit as an exact one is: the tier says which level served it
        assert meta["cache_hit"] is True and meta["cache"] == "hit" and served.headers["x-daari-cache"] == "hit"
        assert meta["verified_by"] == "pair_model" and meta["similarity"] >= 0.8 and meta["entry_id"] == 1
        assert meta["verdict"] == "accepted"
        assert hit["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
        assert len(fake.requests) == upstream_calls  # nothing went upstream

        rejected = await client.post("/v1/chat/completions", json=chat(NEAR_MISS))
        miss = rejected.json()
        meta = miss["daari_meta"]
        assert meta["tier"] == "L3"
        assert meta["cache_hit"] is False and meta["cache"] == "miss" and rejected.headers["x-daari-cache"] == "miss"
        # the default verifier (pair_model) read the cosine L1 found and rejected the near-miss itself
        assert meta["l1"] == meta["verdict"] == "rejected" and meta["l1_rejected"][0]["rule"] == "pair_model"
        assert meta["similarity"] == meta["l1_rejected"][0]["similarity"] >= 0.8
        assert "images" in miss["choices"][0]["message"]["content"]
        unrelated = (await client.post("/v1/chat/completions", json=chat("What is memoization?"))).json()
        assert unrelated["daari_meta"]["tier"] == "L3"
        # the context holds an entry, but no candidate is near enough to judge: a miss, no verdict
        assert unrelated["daari_meta"]["l1"] == "miss" and "verdict" not in unrelated["daari_meta"]
        metrics = (await client.get("/metrics")).text
        assert "daari_cache_false_hits_avoided_total 1.0" in metrics
        assert 'daari_cache_l1_rejections_total{rule="pair_model"} 1.0' in metrics
        # every lookup L1 made is counted: the paraphrase served; the first, the near-miss and the unrelated not
        assert 'daari_cache_lookups_total{level="L1",result="hit"} 1.0' in metrics
        assert 'daari_cache_lookups_total{level="L1",result="miss"} 3.0' in metrics


async def test_l1_hit_streams_to_an_anthropic_client(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(config(tmp_path, upstream)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        tier = await ready(server)
        # max_tokens is part of the lookup context (as of the L0 key): the same on both sides.
        first = (await client.post("/v1/chat/completions", json=chat(ORIGINAL, max_tokens=100))).json()
        await settle(server, tier, 1)
        body = {"model": "good", "max_tokens": 100, "stream": True,
                "messages": [{"role": "user", "content": PARAPHRASE}]}
        text, meta = "", None
        async with client.stream("POST", "/v1/messages", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if event["type"] == "content_block_delta":
                    text += event["delta"]["text"]
                meta = event.get("daari_meta", meta)
        assert text == first["choices"][0]["message"]["content"]
        assert meta is not None and meta["tier"] == "L1"


async def test_no_cache_header_skips_l1_and_stores_nothing(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(config(tmp_path, upstream)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        tier = await ready(server)
        await client.post("/v1/chat/completions", json=chat(ORIGINAL))
        await settle(server, tier, 1)
        reply = await client.post("/v1/chat/completions", json=chat(PARAPHRASE),
                                  headers={"X-Daari-No-Cache": "true"})
        assert reply.json()["daari_meta"]["tier"] == "L3"
        assert "l1" not in reply.json()["daari_meta"]  # L1 did not look: not a miss
        await client.post("/v1/chat/completions", json=chat("What is memoization?"),
                          headers={"X-Daari-No-Cache": "true"})
        assert await tier.cache.call(L1Count()) == 1


TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}}]


def agent_turn(task: str, result: str) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    return {"model": "tools", "tools": TOOLS, "messages": [
        {"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": task},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result}]}


async def test_agent_prefix_hits_only_with_the_same_tool_results(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(config(tmp_path, upstream)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        tier = await ready(server)
        # The fake answers a trailing tool result with text (a final answer): stored in L1.
        first = (await client.post("/v1/chat/completions",
                                   json=agent_turn("Why does the test fail?", "assert x == 1"))).json()
        assert first["daari_meta"]["tier"] == "L3" and first["choices"][0]["finish_reason"] == "stop"
        await settle(server, tier, 1)
        paraphrase = (await client.post("/v1/chat/completions",
                                        json=agent_turn("Why is the test failing?", "assert x == 1"))).json()
        assert paraphrase["daari_meta"]["tier"] == "L1"
        assert paraphrase["daari_meta"]["agent_turn"] is True
        changed = (await client.post("/v1/chat/completions",
                                     json=agent_turn("Why is the test failing?", "assert x == 2"))).json()
        assert changed["daari_meta"]["tier"] == "L3"
        assert changed["daari_meta"]["l1"] == "miss"  # different tool result: no candidate at all


async def test_tool_call_answers_are_never_stored_in_l1(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(config(tmp_path, upstream)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        tier = await ready(server)
        body = {"model": "tools", "tools": TOOLS, "messages": [{"role": "user", "content": "Read a.py"}]}
        reply = (await client.post("/v1/chat/completions", json=body)).json()
        assert reply["choices"][0]["message"]["tool_calls"]
        await client.post("/v1/chat/completions", json=chat("What is memoization?"))
        await settle(server, tier, 1)
        assert await tier.cache.call(L1Count()) == 1  # only the text answer


async def test_a_lookup_whose_context_holds_no_entry_runs_no_model(tmp_path: Path) -> None:
    """Tool-call answers are never stored, so a tool loop's turns run no model at all; a text answer in a new
    context is embedded once, when stored, and the paraphrase sent right after its reply finds it."""
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(config(tmp_path, upstream)) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        tier = await ready(server)
        texts_before = tier.status.texts
        for n in range(3):
            body = {"model": "tools", "tools": TOOLS, "messages": [{"role": "user", "content": f"Read a{n}.py"}]}
            reply = (await client.post("/v1/chat/completions", json=body)).json()
            assert reply["choices"][0]["message"]["tool_calls"] and reply["daari_meta"]["tier"] == "L3"
        assert tier.status.texts == texts_before  # every lookup a miss without the model, nothing stored
        metrics = (await client.get("/metrics")).text
        assert metric(metrics, "daari_cache_l1_misses_without_model_total") == 3
        first = (await client.post("/v1/chat/completions", json=chat(ORIGINAL, temperature=0.5))).json()
        assert first["daari_meta"]["tier"] == "L3"
        # Sent at once: ORIGINAL's answer may still wait for its embedding, and this lookup waits for it.
        hit = (await client.post("/v1/chat/completions", json=chat(PARAPHRASE, temperature=0.5))).json()
        assert hit["daari_meta"]["tier"] == "L1"
        other = (await client.post("/v1/chat/completions", json=chat("What is memoization?", temperature=0.7))).json()
        assert other["daari_meta"]["tier"] == "L3"  # another context (temperature): no model run at lookup
        await settle(server, tier, 2)
        metrics = (await client.get("/metrics")).text
        assert metric(metrics, "daari_cache_l1_misses_without_model_total") == 5
        assert tier.status.texts == texts_before + 3  # ORIGINAL and the last one stored, PARAPHRASE looked up


async def test_entries_and_index_survive_a_restart(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream:
        async with daari_server(config(tmp_path, upstream, rebuild_after=1)) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            tier = await ready(server)
            await client.post("/v1/chat/completions", json=chat(ORIGINAL))
            await settle(server, tier, 1)
            assert tier.index_stats is not None
            with trio.fail_after(10):
                while tier.index_stats.rebuilds < 1:
                    await trio.sleep(0.01)
        assert (tmp_path / "data" / "l1.index").exists()
        async with daari_server(config(tmp_path, upstream)) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            tier = await ready(server)
            assert tier.index_stats is not None and tier.index_stats.buffered == 0  # loaded, not rebuilt
            hit = (await client.post("/v1/chat/completions", json=chat(PARAPHRASE))).json()
            assert hit["daari_meta"]["tier"] == "L1"


async def test_model_verify_serves_nothing_when_the_model_does_not_answer_yes_or_no(tmp_path: Path) -> None:
    fake = FakeOpenAI()  # answers the verifier's question with a sentence: malformed, so rejected
    async with serve_app(fake) as upstream, daari_server(config(tmp_path, upstream, verify="model")) as server, \
            httpx.AsyncClient(base_url=server.url) as client:
        tier = await ready(server)
        await client.post("/v1/chat/completions", json=chat(ORIGINAL))
        await settle(server, tier, 1)
        reply = (await client.post("/v1/chat/completions", json=chat(PARAPHRASE))).json()
        meta = reply["daari_meta"]
        assert meta["tier"] == "L3"
        assert meta["l1_rejected"][0]["rule"] == "model_malformed" and meta["verified_by"] == "model"
        asked = [r for r in fake.requests if "Request A:" in json.dumps(r.body)]
        assert len(asked) == 1 and asked[0].body["max_tokens"] == 3


def metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


async def test_a_tool_loop_embeds_its_user_turn_once(tmp_path: Path) -> None:
    """An agent's tool loop sends the same last user turn with new tool results every turn. A first pass finds no
    entry in any turn's context (the tool results are in it): no model run at lookup, each answer embedded after
    its reply. A second pass over the same tool results (a reworded turn) has entries to search: its first turn
    runs the model, the next ones reuse that embedding; with the memo off every turn runs the model."""
    results = ("assert x == 1", "assert x == 2", "assert x == 3")
    for memo_mb, model_runs in ((8, 1), (0, 3)):
        fake = FakeOpenAI()
        async with serve_app(fake) as upstream, \
                daari_server(config(tmp_path / f"memo{memo_mb}", upstream, embed_memo_mb=memo_mb)) as server, \
                httpx.AsyncClient(base_url=server.url) as client:
            tier = await ready(server)
            texts_before = tier.status.texts
            for result in results:
                reply = (await client.post("/v1/chat/completions",
                                           json=agent_turn("Why does the test fail?", result))).json()
                assert reply["daari_meta"]["tier"] == "L3" and reply["daari_meta"]["l1"] == "miss"
            await settle(server, tier, 3)
            assert tier.status.texts - texts_before == 3  # after each reply, for the answer stored
            texts_before = tier.status.texts
            for result in results:
                again = (await client.post("/v1/chat/completions",
                                           json=agent_turn("Why is the test failing?", result))).json()
                assert again["daari_meta"]["tier"] == "L1"  # the first pass's vectors were stored and are found
            assert tier.status.texts - texts_before == model_runs
            metrics = (await client.get("/metrics")).text
            assert metric(metrics, "daari_cache_l1_embed_memo_hits_total") == 3 - model_runs
            assert metric(metrics, "daari_cache_l1_misses_without_model_total") == 3


async def test_the_embedding_memo_is_kept_per_cache_partition(tmp_path: Path) -> None:
    """A remembered embedding serves its own credential's partition only: a faster answer must not tell one
    credential that another sent the same text."""
    fake = FakeOpenAI()
    async with serve_app(fake) as upstream, daari_server(config(tmp_path, upstream)) as server:
        tier = await ready(server)
        texts_before = tier.status.texts
        first = await tier._embedding("user: why does the test fail?", "partition-a")
        again = await tier._embedding("user: why does the test fail?", "partition-a")
        other = await tier._embedding("user: why does the test fail?", "partition-b")
        assert tier.status.texts - texts_before == 2  # a and b each ran the model; a's second call did not
        assert (again.vector == first.vector).all()
        assert other.seen_chars == first.seen_chars and abs(float(other.vector @ first.vector) - 1) < 1e-4
