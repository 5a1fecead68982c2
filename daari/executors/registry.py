"""Build each configured tier's executor; HTTP upstreams get timeouts, retries and a circuit breaker."""

from __future__ import annotations

from daari.config import Config, TierConfig
from daari.executors.base import Executor


def make_executor(tier: str, config: TierConfig) -> Executor:
    # Imported here so that a proxy with only upstream tiers never imports torch/transformers.
    if config.executor == "embedded":
        from daari.executors.embedded import EmbeddedExecutor
        from daari.models import smollm2_gguf

        smollm2_gguf()  # a missing model package stops `daari serve` at once, with the command that fixes it
        return EmbeddedExecutor(tier, config)
    from daari.executors.resilience import ResilientExecutor

    inner: Executor
    if config.executor == "openai" and config.wire_api == "responses":
        from daari.executors.openai_responses import OpenAIResponsesExecutor

        inner = OpenAIResponsesExecutor(tier, config)
    elif config.executor == "openai":
        from daari.executors.openai_compat import OpenAIExecutor

        inner = OpenAIExecutor(tier, config)
    elif config.executor == "ollama":
        from daari.executors.ollama import OllamaExecutor

        inner = OllamaExecutor(tier, config)
    else:
        from daari.executors.anthropic import AnthropicExecutor

        inner = AnthropicExecutor(tier, config)
    return ResilientExecutor(inner)


def make_executors(config: Config) -> dict[str, Executor]:
    return {tier: make_executor(tier, config.tiers[tier]) for tier in config.configured_tiers()}
