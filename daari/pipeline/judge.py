"""Judging an attempt's answer (routing spec step 12): how confident, and whether that is enough.

Scores are on one 0-1 scale so attempts can be compared: heuristic and logprob confidence are 0-1 already,
a 1-5 self-evaluation is divided by 5. Which method applies: tool calls are judged by their validity;
L6 is trusted; otherwise the L3 heuristic gate, then logprobs when the executor gave them, else (L4/L5)
a self-evaluation asked of the same tier.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from daari.pipeline.runtime import Runtime
from daari.pipeline.side_query import ask_tier
from daari.protocol.chat import ChatRequest, Completion
from daari.routing.classifier import last_user_text
from daari.routing.confidence import (
    heuristic_confidence,
    logprob_confidence,
    parse_self_eval,
    passing_score,
    self_eval_messages,
)


@dataclass(frozen=True)
class Judgement:
    score: float  # 0-1
    method: str  # "tool_calls", "frontier", "heuristic", "logprob", "self_eval"
    passed: bool


def _valid_tool_calls(request: ChatRequest, completion: Completion) -> bool:
    names = {t.name for t in request.tools}
    for call in completion.tool_calls:
        if names and call.name not in names:
            return False
        try:
            json.loads(call.arguments or "{}")
        except ValueError:
            return False
    return True


async def _self_eval(rt: Runtime, tier: str, request: ChatRequest, completion: Completion) -> float:
    question = last_user_text(request)  # the task, not a tool result that may close an agent turn
    reply = await ask_tier(rt, tier, self_eval_messages(question, completion.text), request.model, max_tokens=4)
    rating = parse_self_eval(reply) if reply is not None else None
    return (rating or 0) / 5.0


async def judge(rt: Runtime, tier: str, request: ChatRequest, completion: Completion, *,
                allow_self_eval: bool) -> Judgement:
    def verdict(score: float, method: str) -> Judgement:
        return Judgement(round(score, 4), method, score >= passing_score(tier, method, rt.config.confidence))

    if completion.tool_calls:
        return verdict(1.0 if _valid_tool_calls(request, completion) else 0.0, "tool_calls")
    if tier == "L6":
        return verdict(1.0, "frontier")
    gate = heuristic_confidence(completion.text)
    if gate <= 0.0:
        return verdict(0.0, "heuristic")
    if completion.mean_logprob is not None:
        return verdict(min(gate, logprob_confidence(completion.mean_logprob,
                                                    rt.config.confidence.logprob_floor)), "logprob")
    if tier == "L3" or not allow_self_eval:
        return verdict(gate, "heuristic")
    return verdict(await _self_eval(rt, tier, request, completion), "self_eval")
