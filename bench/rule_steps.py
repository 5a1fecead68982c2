"""`python bench/rule_steps.py`: the per-request rule work of a pass-through, function by function, in process (us
per call, best of five; no server, no upstream).

Two requests: bench.passthrough_cpu's small one (a system prompt and a short question, the fake upstream's answer
to it) and a long conversation answered in text (a 1,500-word system prompt, 60 turns of 50-400 words, ~140,000
characters; a 40-sentence answer), where the judge's checks read the whole prompt. It measures wall time on this
machine, so compare trees in alternation: run as a script with PYTHONPATH naming the tree (an exported base
tree runs the same file: `PYTHONPATH=/tmp/base python bench/rule_steps.py`).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable

from bench.passthrough_cpu import REQUEST
from daari.pipeline.shortcuts import final_user_text
from daari.pipeline.steps.judge import gate
from daari.protocol.chat import ChatRequest, Completion, Message
from daari.protocol.openai_wire import parse_chat_request
from daari.routing.agent_turn import is_agent_turn
from daari.routing.classifier import classify
from daari.routing.client_calls import call_type
from daari.rules.transforms import apply_rules
from daari.sessions.identity import session_key
from daari.sessions.prefix import prefix_fingerprint
from daari.trust.answer_check import answer_violations
from daari.trust.stated_format import read_stated_format

HEADERS = {"host": "127.0.0.1", "content-type": "application/json", "x-daari-no-cache": "true"}
SMALL_ANSWER = "Here is a careful answer about your request: What does `git rebase -i HEAD~3` do?."


def best_us(fn: Callable[[], object], calls: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def long_conversation() -> tuple[ChatRequest, Completion]:
    rng = random.Random(1)
    words = "the a function file test error value return import class def self config path line code fix bug".split()

    def words_of(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    messages = [Message("system", "You are a coding agent. " + words_of(1500))]
    for _ in range(60):
        messages += [Message("user", words_of(rng.randint(50, 400))),
                     Message("assistant", words_of(rng.randint(50, 300)))]
    messages.append(Message("user", "Now explain what the change to the parser does."))
    answer = " ".join(f"Sentence {i} says {words_of(8)}." for i in range(40))
    return ChatRequest(messages=messages, model="m"), Completion(text=answer, model="m")


def judge_checks(request: ChatRequest, answer: Completion, task_type: str, rule_id: str) -> None:
    """What the judge runs on a text answer before any logprob or self-evaluation (steps/judge.py)."""
    stated = read_stated_format(request)
    gate(request, answer, task_type, stated)
    answer_violations(request, answer, task_type, rule_id, stated)


def main() -> None:
    body = json.dumps(REQUEST)
    small = parse_chat_request(json.loads(body), HEADERS)
    answer = Completion(text=SMALL_ANSWER, model="good")
    cls = classify(small)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("parse (json.loads + parse_chat_request)", lambda: parse_chat_request(json.loads(body), HEADERS)),
        ("agent_turn", lambda: is_agent_turn(small)),
        ("classify", lambda: classify(small)),
        ("client_call (call_type)", lambda: call_type(small, HEADERS, cls.tokens)),
        ("session (session_key + prefix_fingerprint)",
         lambda: (session_key(small, HEADERS), prefix_fingerprint(small))),
        ("L2 (apply_rules)", lambda: apply_rules(final_user_text(small) or "", 65536)),
        ("judge's checks", lambda: judge_checks(small, answer, cls.task_type, cls.rule_id)),
    ]
    print("the small pass-through request, us per call:")
    total = 0.0
    for name, fn in rows:
        us = best_us(fn, 2000)
        total += us
        print(f"  {name:45s} {us:9.1f}")
    print(f"  {'all of them':45s} {total:9.1f}")
    long, long_answer = long_conversation()
    long_cls = classify(long)
    print(f"a conversation of {sum(len(m.text()) for m in long.messages):,} characters answered in text, us per call:")
    print(f"  {'classify':45s} {best_us(lambda: classify(long), 50):9.1f}")
    print(f"  {'judge checks':45s} "
          f"{best_us(lambda: judge_checks(long, long_answer, long_cls.task_type, long_cls.rule_id), 50):9.1f}")


if __name__ == "__main__":
    main()
