"""`daari eval draft`: does draft injection (`cache.l1.draft_injection`) win? Offline, on the labeled corpus.

The pairs it applies to are those L1 would find but the verifier rejects: same lookup context, cosine at or
above the threshold, verifier verdict "different". For each (up to `--limit`), a model answers side a (what
L1 holds), then side b twice: plain, and with a's answer injected as a draft (daari/trust/draft.py). Reported:
the answer tokens generated with and without the draft (the saving), the prompt tokens the draft adds, how often
the drafted answer agrees with the plain one (daari/trust/compare.py, with embedding similarity), and how often
it copies the draft (agrees with a's answer), split by label: on a near-miss (label 0) copying is a wrong answer.
The model is daari's embedded model (greedy), or any OpenAI-compatible upstream with `--base-url`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trio

from daari.config import TierConfig
from daari.eval.cache_eval import DEFAULT_SET, _request, load_pairs, score
from daari.protocol.chat import ChatRequest, Completion
from daari.protocol.events import Event, assemble
from daari.trust.compare import compare_answers
from daari.trust.draft import with_draft

Ask = Callable[[ChatRequest], Awaitable[Completion]]


@dataclass(frozen=True)
class Trial:
    label: int
    plain_tokens: int
    drafted_tokens: int
    added_prompt_tokens: int
    agrees_with_plain: str  # agree / disagree / undecided
    copies_draft: str


def _plain(side: str) -> ChatRequest:
    return _request(side.removeprefix("user: "))


async def _asker(base_url: str | None, model: str, max_tokens: int, nursery: trio.Nursery) -> Ask:
    from daari.executors.registry import make_executor

    tier = TierConfig(executor="openai", base_url=base_url, model=model, max_tokens=max_tokens) if base_url \
        else TierConfig(executor="embedded", max_tokens=max_tokens)
    executor = make_executor("L3", tier)
    await executor.start(nursery)

    async def ask(request: ChatRequest) -> Completion:
        events: list[Event] = []

        async def emit(event: Event) -> None:
            events.append(event)

        request.sampling["max_tokens"] = max_tokens
        await executor.generate(request, emit)
        return assemble(events)

    return ask


def summarize(trials: list[Trial]) -> list[str]:
    lines = []
    for label, name in ((0, "near-misses (label 0: a's answer is wrong for b)"),
                        (1, "paraphrases the verifier rejected (label 1: a's answer serves b)")):
        group = [t for t in trials if t.label == label]
        if not group:
            continue
        plain = sum(t.plain_tokens for t in group)
        drafted = sum(t.drafted_tokens for t in group)
        added = sum(t.added_prompt_tokens for t in group)
        agree = sum(1 for t in group if t.agrees_with_plain == "agree")
        copies = sum(1 for t in group if t.copies_draft == "agree")
        lines.append(f"  {name}: {len(group)} pairs")
        change = (drafted - plain) / max(1, plain)
        lines.append(f"    answer tokens: plain {plain}, with draft {drafted} ({change:+.1%}); "
                     f"prompt tokens added {added}")
        lines.append(f"    drafted answer agrees with the plain one: {agree}/{len(group)}; copies the draft: "
                     f"{copies}/{len(group)}")
    return lines


async def run(args: argparse.Namespace) -> int:
    from daari.semantic.minilm import load_minilm

    model = load_minilm()
    pairs = load_pairs(args.set, model.seen_chars)
    scored = score(pairs, model.embed, ["lexical"])
    found = [s for s in scored if s.pair.same_context and s.similarity >= args.threshold
             and not s.verdicts["lexical"].same and s.pair.a.startswith("user: ") and "\nuser: " not in s.pair.a]
    # Both kinds, alternating, so a short run still sees near-misses and rejected paraphrases.
    kinds = [[s for s in found if s.pair.label == label] for label in (0, 1)]
    found = [s for pair in zip(*kinds, strict=False) for s in pair][: args.limit]
    print(f"daari eval draft: {len(found)} pairs L1 would find and the verifier rejects (threshold "
          f"{args.threshold}); model: {args.base_url or 'the embedded model'}, max_tokens {args.max_tokens}")
    trials = []
    async with trio.open_nursery() as nursery:
        ask = await _asker(args.base_url, args.model, args.max_tokens, nursery)
        for s in found:
            answer_a = await ask(_plain(s.pair.a))
            plain_b = await ask(_plain(s.pair.b))
            drafted_b = await ask(with_draft(_plain(s.pair.b), answer_a.text))
            texts = [plain_b.text, drafted_b.text, answer_a.text]
            vectors = np.asarray(model.embed(texts))
            trials.append(Trial(
                s.pair.label, plain_b.usage.completion_tokens or 0, drafted_b.usage.completion_tokens or 0,
                (drafted_b.usage.prompt_tokens or 0) - (plain_b.usage.prompt_tokens or 0),
                compare_answers(plain_b.text, drafted_b.text, float(vectors[0] @ vectors[1])).outcome,
                compare_answers(answer_a.text, drafted_b.text, float(vectors[2] @ vectors[1])).outcome))
            print(f"  {s.pair.id} label {s.pair.label}: tokens {trials[-1].plain_tokens} -> "
                  f"{trials[-1].drafted_tokens}, vs plain {trials[-1].agrees_with_plain}, "
                  f"copies draft {trials[-1].copies_draft}", flush=True)
        nursery.cancel_scope.cancel()
    print("\n".join(summarize(trials)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daari eval draft", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", type=Path, default=DEFAULT_SET)
    parser.add_argument("--threshold", type=float, default=0.70)  # cache.l1.similarity_threshold's default
    parser.add_argument("--limit", type=int, default=8, help="pairs to try (3 generations each), half of each label")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible upstream instead of the embedded model")
    parser.add_argument("--model", default="daari-eval", help="the upstream's model (with --base-url)")
    args = parser.parse_args(argv)
    if not args.set.exists():
        print(f"daari: no labeled set at {args.set}", file=sys.stderr)
        return 2
    return trio.run(run, args)


if __name__ == "__main__":
    raise SystemExit(main())
