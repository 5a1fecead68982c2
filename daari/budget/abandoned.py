"""What an attempt cost: the usage the upstream reported (at its end, or before it was cut off mid-way: its client
left, its upstream broke off), else an estimate from what was relayed (docs/budget.md, "Answers cut off")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from daari.protocol.anthropic_render import neutral_usage
from daari.protocol.chat import Usage
from daari.protocol.events import Event, Finish, NativeEvent, TextDelta, ToolCallDelta, ToolCallStart
from daari.protocol.tokens import estimate_text_tokens

# "reported": every count is the upstream's; "reported_input": the prompt's is (Anthropic's message_start), the
# answer's is estimated; "estimated": both are (an OpenAI stream reports usage only in its last chunk).
Source = Literal["reported", "reported_input", "estimated"]


def usage_so_far(events: Sequence[Event], prompt_estimate: int) -> tuple[Usage, Source, str | None]:
    """The usage of an answer that ended after `events`, how it was known, and the model the upstream named."""
    final = _only_final_count(events)
    if final is not None:
        return final.usage, "reported", final.model
    return _walked(events, prompt_estimate)


def _only_final_count(events: Sequence[Event]) -> Finish | None:
    """The answer's one Finish when it is the last event, carries the upstream's count and names the model: what
    `_walked` would return, found without a Python step per event (an answer that completed, nearly every one;
    the walk cost ~1-2 us per relayed delta on these cores)."""
    last = events[-1] if events else None
    if type(last) is not Finish or not (last.usage.prompt_tokens or last.usage.completion_tokens) or not last.model:
        return None
    kinds = list(map(type, events))  # in C: is it the only Finish?
    return last if kinds.count(Finish) == 1 else None


def _walked(events: Sequence[Event], prompt_estimate: int) -> tuple[Usage, Source, str | None]:
    reported: dict[str, object] = {}
    model: str | None = None
    relayed_tokens = 0
    for event in events:
        if isinstance(event, Finish):  # it ended after all: the upstream's own final count, when it gave one
            if event.usage.prompt_tokens or event.usage.completion_tokens:
                return event.usage, "reported", event.model or model
            model = event.model or model  # none (a server that ignores stream_options): estimated as if cut off
        if isinstance(event, NativeEvent) and event.protocol == "anthropic":
            if event.name == "message_start" and isinstance(message := event.data.get("message"), dict):
                if isinstance(usage := message.get("usage"), dict):
                    reported.update(usage)
                model = model or (message.get("model") if isinstance(message.get("model"), str) else None)
            elif event.name == "message_delta" and isinstance(usage := event.data.get("usage"), dict):
                reported.update(usage)  # output_tokens so far (cumulative)
        elif isinstance(event, TextDelta):
            relayed_tokens += event.tokens or estimate_text_tokens(event.text)
        elif isinstance(event, ToolCallDelta):
            relayed_tokens += estimate_text_tokens(event.arguments)
        elif isinstance(event, ToolCallStart):
            relayed_tokens += estimate_text_tokens(event.name)
    if not reported:
        return Usage(prompt_tokens=prompt_estimate, completion_tokens=relayed_tokens), "estimated", model
    usage = neutral_usage(reported)
    # message_start's output_tokens is a token or two; the text relayed since may say more.
    output = max(usage.completion_tokens, relayed_tokens)
    source: Source = "reported" if "output_tokens" in reported and output == usage.completion_tokens \
        else "reported_input"
    return Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=output, cached_tokens=usage.cached_tokens,
                 cache_write_tokens=usage.cache_write_tokens), source, model
