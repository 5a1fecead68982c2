"""`python -m bench.l1 [--sizes 10000,100000]`: L1 costs, measured in one process with the real model.

1. One L1 lookup end to end (embed + search + verify, through the actors) at one connection, p50, as a
   ratio to one bare embedding (the model called directly, no actor), and what a miss costs over L0-only.
2. Embedder throughput: 32 concurrent requests through the EmbedderActor vs one at a time.
3. The index at scale (random unit vectors, `index_trees` trees): annoy search p99, build time, memory
   (the index file is memory-mapped: its size is what it takes), and lookup p99 while a rebuild runs.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import trio

from actors.embedder import Embed, EmbedderActor, EmbedderStatus
from actors.runtime import Mailbox
from actors.semantic_cache import L1Put, SemanticCacheActor
from actors.verifier import VerifierActor
from bench.report import Table, machine, print_tables, ratio
from daari.config import L1Config
from daari.metrics import Metrics
from daari.pipeline.shortcuts import ShortcutQuery
from daari.pipeline.steps.l1 import SemanticTier
from daari.protocol.chat import ChatRequest, Completion, Message
from daari.semantic.index import VectorIndex, rebuild
from daari.semantic.minilm import DIMENSIONS, load_minilm

TOPICS = ["list Docker containers", "undo the last git commit", "read a CSV file with pandas",
          "reverse a string in Python", "center a div with CSS", "kill the process on a port",
          "merge two dictionaries", "parse JSON in Rust", "set an environment variable", "write a pytest fixture"]


def _prompts(n: int) -> list[str]:
    return [f"How do I {TOPICS[i % len(TOPICS)]} (case {i})?" for i in range(n)]


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


async def _lookup_and_throughput(tables: list[Table], data_dir: Path) -> None:
    model = load_minilm()
    status, config = EmbedderStatus(), L1Config()
    embedder_box, cache_box, verifier_box = Mailbox("embedder", 256), Mailbox("l1", 256), Mailbox("verifier", 256)
    embedder, cache, verifier = embedder_box.address, cache_box.address, verifier_box.address
    async with trio.open_nursery() as nursery:
        embedder_actor = EmbedderActor(status, config.embed_batch_size, config.embed_batch_wait_ms / 1000)
        await nursery.start(embedder_actor.serve_inbox, embedder_box.inbox)
        await nursery.start(SemanticCacheActor(data_dir, max_entries=10**6, max_age_s=1e9, trees=16,
                                               rebuild_after=10**6).serve_inbox, cache_box.inbox)
        await nursery.start(VerifierActor("lexical").serve_inbox, verifier_box.inbox)
        await status.started.wait()
        tier = SemanticTier(config, embedder, status, cache, verifier, Metrics())
        # 1000 stored prompts in one context, so a lookup searches a real buffer.
        stored = _prompts(1000)
        for text, vector in zip(stored, model.embed(stored), strict=True):
            probe_request = ChatRequest([Message("user", text)], "bench")
            probe = await tier._probe(ShortcutQuery(probe_request, {}, "k"))
            assert probe is not None
            await cache.call(L1Put(probe.context, probe.text, vector, Completion(text="answer"), "L3"))
        queries = [f"Show me how to {TOPICS[i % len(TOPICS)]} (case {i})" for i in range(200)]
        bare, lookup, miss = [], [], []
        for i, text in enumerate(queries):
            started = time.perf_counter()
            model.embed([f"user: {text}"])
            bare.append(time.perf_counter() - started)
            query = ShortcutQuery(ChatRequest([Message("user", text)], "bench"), {}, f"q{i}")
            started = time.perf_counter()
            await tier.answer(query)
            lookup.append(time.perf_counter() - started)
            # A new text (not the embedding memo's), for a model nothing was stored for.
            other = ShortcutQuery(ChatRequest([Message("user", f"{text}, for another model")], "other-model"), {},
                                  f"m{i}")
            started = time.perf_counter()
            await tier.answer(other)  # nothing stored for this model: a miss, its context holding no entry
            miss.append(time.perf_counter() - started)
        b, lk, ms = (statistics.median(x) * 1000 for x in (bare, lookup, miss))
        table = Table("L1 lookup at one connection (ms, p50 of 200)", ["what", "p50 ms", "vs one bare embedding"])
        table.add("one bare embedding (model.embed, no actor)", b, "1.00x")
        table.add("L1 lookup: embed + search 1,000 entries + verify (actors)", lk, ratio(lk, b))
        table.add("L1 on a miss, a new text in a context no entry shares (no model run since 2026-12-07)", ms,
                  ratio(ms, b))
        tables.append(table)

        async def one_by_one(n: int) -> float:
            started = time.perf_counter()
            for i in range(n):
                await embedder.call(Embed(f"user: one at a time {i}"))
            return n / (time.perf_counter() - started)

        async def concurrent(n: int, clients: int) -> tuple[float, float]:
            batches_before, texts_before = status.batches, status.texts

            async def client(c: int) -> None:
                for i in range(n // clients):
                    await embedder.call(Embed(f"user: how do I fix bug {c}-{i} in my parser?"))

            started = time.perf_counter()
            async with trio.open_nursery() as clients_nursery:
                for c in range(clients):
                    clients_nursery.start_soon(client, c)
            rate = n / (time.perf_counter() - started)
            return rate, (status.texts - texts_before) / max(1, status.batches - batches_before)

        serial = await one_by_one(100)
        rate, per_batch = await concurrent(1024, 32)
        table = Table("Embedder throughput (prompts/s, EmbedderActor)", ["clients", "prompts/s", "mean batch"])
        table.add("1 (one at a time)", serial, "1")
        table.add("32 concurrent", rate, per_batch)
        table.notes.append(f"batching gain: {ratio(rate, serial)}; target >= 300 prompts/s at 32 concurrent")
        tables.append(table)
        nursery.cancel_scope.cancel()


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _index_at(n: int, trees: int, data_dir: Path) -> list[object]:
    rng = np.random.default_rng(n)
    vectors = rng.standard_normal((n, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    contexts = rng.integers(0, 4, n)  # a few lookup contexts, as several models or system prompts give
    index = VectorIndex()
    for i in range(n):
        index.add(i, int(contexts[i]), vectors[i])
    path = data_dir / f"bench-{n}.index"
    rss_before = _rss_mb()
    started = time.perf_counter()
    sealed = rebuild(index.snapshot(), trees, path)
    build_s = time.perf_counter() - started
    index.swap(sealed, n)
    gc.collect()
    queries = [(vectors[i] + 0.05 * rng.standard_normal(DIMENSIONS).astype(np.float32)) for i in range(1000)]
    queries = [q / np.linalg.norm(q) for q in queries]
    times = []
    for i, q in enumerate(queries):
        started = time.perf_counter()
        index.search(q, int(contexts[i]), 0.8, 3)
        times.append(time.perf_counter() - started)
    rss_after = _rss_mb()
    # Lookups while a rebuild of the same size runs on a worker thread (as the actor does).
    for i in range(200):
        index.add(n + i, 0, queries[i])
    snapshot = index.snapshot()
    done = threading.Event()
    during: list[float] = []

    def rebuild_thread() -> None:
        rebuild(snapshot, trees, data_dir / f"bench-{n}-2.index")
        done.set()

    thread = threading.Thread(target=rebuild_thread)
    rebuild_started = time.perf_counter()
    thread.start()
    i = 0
    while not done.is_set():
        q = queries[i % len(queries)]
        started = time.perf_counter()
        index.search(q, int(contexts[i % len(queries)]), 0.8, 3)
        during.append(time.perf_counter() - started)
        i += 1
        time.sleep(0.001)  # a lookup stream, not a busy loop that would starve the rebuild
    thread.join()
    rebuild_s = time.perf_counter() - rebuild_started
    return [f"{n:,}", _pct(times, 50) * 1000, _pct(times, 99) * 1000, build_s, path.stat().st_size / 2**20,
            rss_after - rss_before, _pct(during, 99) * 1000, len(during), rebuild_s]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.l1", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000", help="index sizes, comma-separated (1000000 takes long)")
    parser.add_argument("--trees", type=int, default=L1Config().index_trees)
    parser.add_argument("--skip-model", action="store_true", help="only the index part")
    args = parser.parse_args(argv)
    tables: list[Table] = []
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_model:
            trio.run(_lookup_and_throughput, tables, Path(tmp))
        table = Table(f"annoy index at scale ({args.trees} trees, 384 dims, 4 contexts)",
                      ["entries", "search p50 ms", "search p99 ms", "build s", "index file MB",
                       "RSS growth MB", "p99 ms during rebuild", "lookups during rebuild", "rebuild s"])
        for n in (int(s) for s in args.sizes.split(",")):
            table.add(*_index_at(n, args.trees, Path(tmp)))
        table.notes.append("search = annoy (64 neighbours, filtered by context) + the exact buffer, then threshold")
        tables.append(table)
    print(machine())
    print_tables(tables)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
