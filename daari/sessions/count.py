"""daari's token count of a request when no Anthropic upstream can count it (docs/agents.md, "count_tokens").

The raw estimate (about 4 characters a token, protocol/tokens.py) is off by the model's tokenizer. Every answer
an upstream gives reports the real prompt size, so daari calibrates: within a session, a request counts as the
last answered turn's real prompt plus the estimate of what was added since, scaled by the session's measured
ratio of real to estimated tokens for what its turns add; without a session history, the estimate scaled by the
overall ratio. The error is then confined to
the few messages added since the last turn (measured: tests/test_session_replay.py, docs/agents.md).
"""

from __future__ import annotations

from daari.sessions.store import SessionState


def calibrated_count(estimate: int, state: SessionState | None, ratio: float) -> int:
    if state is not None and state.last_prompt_tokens and state.last_estimate and estimate >= state.last_estimate:
        growth = state.growth_ratio or ratio
        return state.last_prompt_tokens + round((estimate - state.last_estimate) * growth)
    return max(1, round(estimate * ratio))
