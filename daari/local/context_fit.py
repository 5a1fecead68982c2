"""Fitting a request to a model's context window: whether it fits at all, and the `num_ctx` Ollama must be given.

daari counts tokens with its cheap estimate (protocol/tokens.py, about 4 characters a token). Code and JSON run
denser than that, so a prompt's need is the estimate times `MARGIN` plus `SLACK`, and it fits only with room for
`MIN_ANSWER` tokens of answer. A request that does not fit goes to the next tier (never cut: Ollama would drop the
start of the prompt, the system prompt and tools first). `num_ctx` is the need plus the answer's `max_tokens`,
rounded up to a multiple of 1024 (Ollama reloads a model when num_ctx changes: round numbers change less), and
never above the window.
"""

from __future__ import annotations

import math

MARGIN = 1.35  # bench/token_estimate.py: a BPE tokenizer counts 1.12x the estimate on average, 1.31x at p90
SLACK = 128  # chat template framing
MIN_ANSWER = 256
STEP = 1024
DEFAULT_ANSWER = 1024  # the answer reserved when a request sets no max_tokens


def prompt_need(estimate: int) -> int:
    return math.ceil(estimate * MARGIN) + SLACK


def fits(estimate: int, window: int | None) -> bool:
    return window is None or prompt_need(estimate) + MIN_ANSWER <= window


def num_ctx(estimate: int, max_tokens: int | None, window: int | None) -> int:
    need = prompt_need(estimate) + (max_tokens if max_tokens is not None else DEFAULT_ANSWER)
    rounded = math.ceil(need / STEP) * STEP
    return min(rounded, window) if window is not None else rounded
