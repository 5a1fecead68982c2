"""Agent sessions in the pipeline (docs/agents.md, "Sessions"; docs/routing.md, "Session affinity"):

- `SessionStep` (routed, before execute): which session the request belongs to (sessions/identity.py), the
  provider cache that is warm for it, and whether its stable prefix changed (`daari_meta.prefix_changed`).
- `SessionAffinity` (an execute planner): a session whose cache is warm at a tier of the chain starts there
  unless moving saves more than rebuilding that cache costs (sessions/economics.py); the estimate is in
  `daari_meta.affinity_estimate`, the outcome in `affinity`.
- `SessionHygiene` (the execute step's request shaper): the request as the tier's upstream must receive it,
  thinking blocks another provider signed left out (sessions/hygiene.py).
- `SessionRecordStep` (finish, before render): who answered, with what usage: the session's warm cache, the
  prompt tokens an answer from elsewhere paid for again (`lost_cache_tokens`), the thinking blocks and tool-use
  ids of the answer with their provider, and the estimate's calibration.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping

from daari.pipeline.meta import Attempt
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn
from daari.protocol.chat import ChatRequest, Message, ToolCall
from daari.sessions.economics import Rates, weigh_move
from daari.sessions.hygiene import for_anthropic_upstream, safe_tool_id, served_signatures, tool_key
from daari.sessions.identity import named_session_key, session_key
from daari.sessions.prefix import cache_ttl_s, marks_cache, prefix_fingerprint
from daari.sessions.store import SessionStore, Warmth
from daari.sessions.turn import SessionTurn

DEFAULT_OUTPUT_TOKENS = 500  # a session's first turn: what an agent turn's answer usually costs
OUTPUT_WEIGHT = 0.3
AUTOMATIC_CACHE_MIN_TOKENS = 1024  # OpenAI caches prompts of at least this many tokens by itself
MODEL_EXECUTORS = frozenset({"embedded", "openai", "openai_responses", "ollama", "anthropic"})
AUTOMATIC_CACHES = frozenset({"openai", "openai_responses"})


@dataclasses.dataclass(frozen=True)
class Upstreams:
    """What the session parts know of each configured tier, fixed at start."""

    providers: Mapping[str, str]  # tier -> provider id (sessions/hygiene.py `provider_id`)
    kinds: Mapping[str, str]  # tier -> executor kind
    rates: Mapping[str, Rates]  # tier -> prices and cache multipliers


class SessionStep:
    name = "session"

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    async def __call__(self, turn: Turn) -> Answer | None:
        request = turn.request
        key = session_key(request, turn.headers)
        state = self.store.state(key)
        now = self.store.clock()
        home = copy.copy(state.home) if state.home is not None and state.home.is_warm(now) else None
        raw = request.raw if request.protocol == "anthropic" else {}
        estimate = turn.classification.tokens if turn.classification is not None else 0
        turn.session = SessionTurn(key, state, home, estimate, writes_cache=marks_cache(raw) if raw else True,
                                   ttl_s=cache_ttl_s(raw) if raw else 300.0)
        turn.meta.session = key
        fingerprint = prefix_fingerprint(request)
        if state.prefix and state.prefix != fingerprint:
            turn.meta.details["prefix_changed"] = True  # the provider cache cannot hold across this turn
        state.prefix = fingerprint
        return None


class SessionAffinity:
    def __init__(self, store: SessionStore, upstreams: Upstreams) -> None:
        self.store = store
        self.upstreams = upstreams

    def __call__(self, turn: Turn, chain: list[str]) -> list[str]:
        session, meta = turn.session, turn.meta
        if session is None or not chain or turn.controls.tier_override is not None:
            return chain
        home = session.home
        if home is None:
            meta.affinity = "new" if session.state.home is None else "cold"
            return chain
        if chain[0] == home.tier:
            meta.affinity = "home"
            return chain
        rates = self.upstreams.rates
        prompt = round(session.estimate * self.store.ratio)
        output = round(session.state.mean_output_tokens) or DEFAULT_OUTPUT_TOKENS
        if home.tier not in chain:
            meta.affinity = "move"  # the plan cannot use the home tier (below the classified tier, or skipped)
            meta.details["affinity_estimate"] = {"home": home.tier, "planned": chain[0], "reason": "home not planned"}
            return chain
        estimate = weigh_move(rates.get(home.tier, Rates()), rates.get(chain[0], Rates()), prompt,
                              home.warm_tokens, output, session.writes_cache)
        meta.details["affinity_estimate"] = {"home": home.tier, "planned": chain[0], "warm_tokens": home.warm_tokens,
                                             "prompt_tokens": prompt, **estimate.to_json()}
        if not estimate.stay:
            meta.affinity = "move"
            return chain
        meta.affinity = "stay"
        start = chain.index(home.tier)
        for tier in chain[:start]:
            meta.attempts.append(Attempt(tier, "skipped_affinity"))
        return chain[start:]


class SessionHygiene:
    def __init__(self, store: SessionStore, upstreams: Upstreams) -> None:
        self.store = store
        self.upstreams = upstreams

    def __call__(self, turn: Turn, tier: str) -> ChatRequest:
        request = turn.request
        if self.upstreams.kinds.get(tier) != "anthropic":
            return request
        if request.protocol == "anthropic" and request.raw:
            cleaned = for_anthropic_upstream(request.raw, self.upstreams.providers.get(tier, tier),
                                             self.store.producer)
            if not cleaned.changed:
                return request
            turn.meta.details["hygiene"] = {"tier": tier, "dropped_thinking": cleaned.dropped,
                                            "thinking_off": cleaned.thinking_off, "renamed_ids": cleaned.renamed_ids}
            return dataclasses.replace(request, raw=cleaned.body)
        messages = safe_neutral_ids(request.messages)
        return request if messages is None else dataclasses.replace(request, messages=messages)


def safe_neutral_ids(messages: list[Message]) -> list[Message] | None:
    """Tool-call ids Anthropic accepts in translated messages (None: all were fine already)."""
    changed = False
    out: list[Message] = []
    for message in messages:
        calls = [ToolCall(safe_tool_id(c.id), c.name, c.arguments) for c in message.tool_calls]
        call_id = safe_tool_id(message.tool_call_id) if message.tool_call_id else message.tool_call_id
        if calls != message.tool_calls or call_id != message.tool_call_id:
            changed = True
            message = dataclasses.replace(message, tool_calls=calls, tool_call_id=call_id)
        out.append(message)
    return out if changed else None


class SessionRecordStep:
    name = "session_record"

    def __init__(self, store: SessionStore, upstreams: Upstreams) -> None:
        self.store = store
        self.upstreams = upstreams

    async def __call__(self, turn: Turn, answer: Answer) -> None:
        session, meta = turn.session, turn.meta
        if session is None:
            if turn.parsed:  # answered before routing (L0, a shortcut): the session it names, for the report
                # (never the prefix hash: reading a large prefix would cost every L0 hit)
                meta.session = named_session_key(turn.request, turn.headers)
            return
        if answer.executor not in MODEL_EXECUTORS:
            return
        tier, completion = answer.tier, answer.completion
        usage, state, store = completion.usage, session.state, self.store
        provider = self.upstreams.providers.get(tier, tier)
        store.signed([*served_signatures(completion.native), *(tool_key(c.id) for c in completion.tool_calls)],
                     provider)
        state.turns += 1
        state.prompt_tokens += usage.prompt_tokens
        state.cache_read_tokens += usage.cached_tokens
        if usage.prompt_tokens:
            store.calibrate(session.estimate, usage.prompt_tokens, state)
            state.last_prompt_tokens, state.last_estimate = usage.prompt_tokens, session.estimate
        if usage.completion_tokens:
            state.mean_output_tokens += OUTPUT_WEIGHT * (usage.completion_tokens - state.mean_output_tokens)
        home = session.home
        if home is not None and home.tier != tier and home.provider != provider:
            held = min(home.warm_tokens, usage.prompt_tokens or session.estimate)
            meta.lost_cache_tokens = max(0, held - usage.cached_tokens)
        warm = usage.cached_tokens + usage.cache_write_tokens
        if not warm and self.upstreams.kinds.get(tier) in AUTOMATIC_CACHES and \
                usage.prompt_tokens >= AUTOMATIC_CACHE_MIN_TOKENS:
            warm = usage.prompt_tokens  # OpenAI caches a long prompt by itself and reports reads only
        if warm:
            state.home = Warmth(tier, provider, completion.model, warm, store.clock(), session.ttl_s)
