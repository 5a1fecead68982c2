"""The routing spec's task types: what a request is, as daari_meta.task_type reports it."""

from __future__ import annotations

# Set by the classifier (daari/routing/classifier.py) for requests a model tier answers.
CLASSIFY = "classify"  # label, route, score, yes/no
EXTRACT = "extract"  # pull structured data out of a small input
TRANSFORM = "transform"  # reformat, convert, light edit
GENERATE_SMALL = "generate_small"  # short completion
GENERATE_LARGE = "generate_large"  # long reasoning, multi-file, large context
AGENT_TURN = "agent_turn"  # tools in the request or tool calls/results in the history (ADR-0004)
MODEL_TASK_TYPES = (CLASSIFY, EXTRACT, TRANSFORM, GENERATE_SMALL, GENERATE_LARGE, AGENT_TURN)

# Set by the shortcut tiers themselves (ShortcutResult.task_type), never by the classifier.
CACHE_HIT = "cache_hit"  # L0 / L1
RULE = "rule"  # L2 deterministic transform
TOOL = "tool"  # Lt / CCS
SHORTCUT_TASK_TYPES = (CACHE_HIT, RULE, TOOL)

TASK_TYPES = MODEL_TASK_TYPES + SHORTCUT_TASK_TYPES
