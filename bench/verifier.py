"""`python -m bench.verifier`: what one L1 verification costs per mode, as a ratio to one embedding (one run).

The pairs are the held-back part of evals/cache/verification.jsonl (one-turn prompts as L1 embeds them);
each is verified in turn, once per mode, and one bare embedding of a prompt (the model called directly) is
timed in the same loop. The target for `pair_model` is a p50 within 2x one embedding.
"""

from __future__ import annotations

import statistics
import time

import trio

from actors.verifier import VerifierActor, Verify
from bench.report import Table, machine, print_tables, ratio
from daari.eval.cache_eval import DEFAULT_SET, load_pairs, similarities
from daari.semantic.minilm import load_minilm

ROUNDS = 3


async def _verify_ms(actor: VerifierActor, query: str, candidate: str, similarity: float) -> float:
    started = time.perf_counter()
    await actor.verify(Verify(query, candidate, similarity))
    return (time.perf_counter() - started) * 1000


async def main() -> None:
    model = load_minilm()
    pairs = [p for p in load_pairs(DEFAULT_SET, model.seen_chars) if p.split == "heldout" and p.same_context]
    sims = similarities(pairs, model.embed)
    actors = {mode: VerifierActor(mode) for mode in ("lexical", "pair_model")}
    async with trio.open_nursery() as nursery:
        for actor in actors.values():
            await nursery.start(_run_lifespan, actor)
        timings: dict[str, list[float]] = {"embedding": [], **{mode: [] for mode in actors}}
        for _ in range(ROUNDS):
            for pair, similarity in zip(pairs, sims, strict=True):
                started = time.perf_counter()
                model.embed([pair.a])
                timings["embedding"].append((time.perf_counter() - started) * 1000)
                for mode, actor in actors.items():
                    timings[mode].append(await _verify_ms(actor, pair.a, pair.b, similarity))
        nursery.cancel_scope.cancel()
    embedding = statistics.median(timings["embedding"])
    table = Table(f"L1 verification per candidate (ms, p50 of {len(pairs) * ROUNDS}: {len(pairs)} held-back pairs "
                  f"x {ROUNDS})", ["what", "p50 ms", "p99 ms", "vs one embedding"])
    for what, values in timings.items():
        values = sorted(values)
        p50, p99 = statistics.median(values), values[int(len(values) * 0.99) - 1]
        label = "one embedding (MiniLM, one prompt)" if what == "embedding" else f"verify: {what}"
        table.add(label, p50, p99, ratio(p50, embedding))
    table.notes.append("target: verify: pair_model p50 within 2x one embedding")
    print(machine())
    print_tables([table])


async def _run_lifespan(actor: VerifierActor, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    async with actor.lifespan():
        await actor.loaded.wait()  # loaded in the background: measure the loaded model
        task_status.started()
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main)
