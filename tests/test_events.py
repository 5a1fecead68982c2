"""assemble/replay: a stored completion streams back as several deltas and reassembles identically."""

import pytest

from daari.protocol.chat import Completion, ToolCall, Usage
from daari.protocol.events import Finish, TextDelta, ToolCallDelta, ToolCallStart, assemble, replay


def test_replay_then_assemble_is_identity_and_streams_in_pieces() -> None:
    completion = Completion(
        text="The quick brown fox jumps over the lazy dog, twice, and then sleeps. ünïcødé ✓",
        tool_calls=[ToolCall("call_1", "search", '{"query": "foxes and dogs", "limit": 10}'),
                    ToolCall("call_2", "noop", "{}")],
        finish_reason="tool_calls", usage=Usage(12, 34), model="m",
    )
    events = list(replay(completion))
    assert sum(isinstance(e, TextDelta) for e in events) > 2
    assert sum(isinstance(e, ToolCallDelta) and e.index == 0 for e in events) > 1
    again = assemble(events)
    assert again.to_json() == completion.to_json()


def test_assemble_requires_finish_and_averages_logprobs() -> None:
    with pytest.raises(ValueError):
        assemble([TextDelta("hi")])
    done = assemble([TextDelta("a", logprob=-1.0, tokens=1), TextDelta("b", logprob=-3.0, tokens=1),
                     ToolCallStart(0, "c", "f"), Finish("stop")])
    assert done.mean_logprob == -2.0
    assert done.tool_calls == [ToolCall("c", "f", "")]
