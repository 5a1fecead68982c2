"""One workload spread round-robin over several daari: each of `prompts` requests `repeats` times, shuffled,
`workers` at a time; how many were cache hits and the req/s. Used by bench.redis_hit and bench.org_hit."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import httpx
import trio

from bench.l0_hit import HEADERS, PATH


def shuffled_work(prompts: int, repeats: int, seed: int) -> list[int]:
    """Each prompt's index `repeats` times, in a shuffled order (the same for a given seed)."""
    work = [i for i in range(prompts) for _ in range(repeats)]
    random.Random(seed).shuffle(work)
    return work


def drive(urls: list[str], work: list[int], body: Callable[[int], bytes], workers: int) -> tuple[int, float]:
    """Send `body(i)` for each i of `work`, the j-th to `urls[j % len(urls)]`, from `workers` concurrent tasks on
    as many connections: (cache hits, req/s)."""

    async def main() -> tuple[int, float]:
        hits = 0
        queue = list(enumerate(work))
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=workers)) as client:
            async def worker() -> None:
                nonlocal hits
                while queue:
                    j, i = queue.pop(0)
                    response = await client.post(urls[j % len(urls)] + PATH, content=body(i), headers=HEADERS)
                    response.raise_for_status()
                    hits += response.headers.get("x-daari-cache") == "hit"

            started_at = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for _ in range(workers):
                    nursery.start_soon(worker)
            return hits, len(work) / (time.perf_counter() - started_at)

    return trio.run(main)
