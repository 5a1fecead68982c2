"""Writes evals/judge/qwen_answers.jsonl: the default embedded model's real answers to every prompt of the set.

Each prompt is parsed by daari's own wire (OpenAI or Anthropic) and answered by daari's EmbeddedExecutor,
greedy, exactly as the L3 tier answers it, except that generation stops at a cap of new tokens: 64 for the
short forms (titles, commit messages, topic checks, JSON, stated formats), 128 for summaries and routine
questions. The clients ask for 512 to 32,000; at ~14 tokens/s (far less on a shared machine) a runaway answer
would take minutes, and a short-form answer still going at 64 tokens is cut by max_tokens either way:
`finish_reason` "length" is what the judge reads.
Slow (minutes): run it only when the prompts or the model change, then relabel the changed rows in
build_qwen_set.py (build_judge_set.py holds SmolLM2's labels, for embedded_answers.jsonl).

    python -m evals.judge.generate_embedded [--only PROMPT_ID ...] [--out FILE] [--interleave]

`--out` keeps another model's answers apart (the default, qwen_answers.jsonl, holds the default model's,
Qwen2.5-Coder-0.5B; embedded_answers.jsonl SmolLM2's, written when it was the default). The file is rewritten
after every answer, so a run that is stopped leaves every finished answer usable. `--interleave` answers the
prompts one kind at a time in turn (a commit message, a title, a summary, ...), so a partial run covers every
kind. `--cap N` replaces the caps by kind with one: the prompt's own max_tokens up to N (Qwen's answers cut at 64
were regenerated with `--cap 200 --only ...`: the routine prompts ask for 160, and L3 gives them that).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import trio

from daari.config import TierConfig
from daari.eval.judge_set import parse_request
from daari.executors.embedded import EmbeddedExecutor
from daari.executors.embedded_model import MODEL_NAME
from daari.protocol.events import Event, assemble
from evals.judge.judge_prompts import prompts

OUT = Path(__file__).with_name("qwen_answers.jsonl")  # the default model's: keep SmolLM2's file as it was
SHORT_CAP, LONG_CAP = 64, 128
LONG_KINDS = ("summary", "routine")


async def answer(executor: EmbeddedExecutor, prompt: dict[str, Any], one_cap: int | None = None) -> dict[str, Any]:
    request = parse_request(prompt)
    asked = request.max_tokens
    cap = one_cap or (LONG_CAP if prompt["kind"] in LONG_KINDS else SHORT_CAP)
    request.sampling["max_tokens"] = min(asked or executor.config.max_tokens, cap)
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    started = time.monotonic()
    await executor.generate(request, emit)
    completion = assemble(events)
    return {"prompt_id": prompt["id"], "answer": completion.text, "finish_reason": completion.finish_reason,
            "mean_logprob": None if completion.mean_logprob is None else round(completion.mean_logprob, 4),
            "completion_tokens": completion.usage.completion_tokens, "max_new_tokens": request.max_tokens,
            "seconds": round(time.monotonic() - started, 1), "model": MODEL_NAME}


def interleaved(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prompts one of each kind in turn (each kind keeps the set's order)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_kind.setdefault(row["kind"], []).append(row)
    queues = list(by_kind.values())
    return [queue[i] for i in range(max(map(len, queues), default=0)) for queue in queues if i < len(queue)]


def load(out: Path) -> dict[str, dict[str, Any]]:
    if not out.exists():
        return {}
    return {row["prompt_id"]: row for row in map(json.loads, out.read_text().splitlines()) if row}


def save(out: Path, done: dict[str, dict[str, Any]]) -> None:
    """Every finished answer, in the set's order (rewritten after each one: a stopped run keeps them all)."""
    out.write_text("".join(json.dumps(done[p["id"]], ensure_ascii=False) + "\n" for p in prompts() if p["id"] in done))


async def main_async(only: set[str], out: Path, interleave: bool, cap: int | None) -> None:
    executor = EmbeddedExecutor("L3", TierConfig())
    done = load(out)
    for prompt in interleaved(prompts()) if interleave else prompts():
        if (only and prompt["id"] not in only) or (not only and prompt["id"] in done):
            continue
        row = await answer(executor, prompt, cap)
        done[prompt["id"]] = row
        print(f"{row['prompt_id']:<40} {row['seconds']:>6}s {row['finish_reason']:<7} {row['answer'][:60]!r}",
              flush=True)
        save(out, done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=[], help="prompt ids to (re)generate")
    parser.add_argument("--out", type=Path, default=OUT, help="the answers file (default: %(default)s)")
    parser.add_argument("--interleave", action="store_true", help="answer one prompt of each kind in turn")
    parser.add_argument("--cap", type=int, default=None,
                        help="one cap for every kind: the prompt's own max_tokens up to this (default: 64/128 by kind)")
    args = parser.parse_args()
    trio.run(main_async, set(args.only), args.out, args.interleave, args.cap)


if __name__ == "__main__":
    main()
