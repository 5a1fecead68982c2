"""Build each configured tier's executor; HTTP upstreams get timeouts, retries and a circuit breaker."""

from __future__ import annotations

from daari.config import Config, TierConfig
from daari.executors.base import Executor


def make_executor(tier: str, config: TierConfig, data_dir: str | None = None) -> Executor:
    # Imported here so that a proxy with only upstream tiers never imports llama.cpp.
    if config.executor == "embedded":
        from daari.executors.embedded import EmbeddedExecutor
        from daari.models import check_installed, embedded_model

        check_installed(embedded_model(config.model))  # a missing model package stops `daari serve` at once,
        return EmbeddedExecutor(tier, config, data_dir=data_dir)  # with the command that fixes it
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
    return {tier: make_executor(tier, config.tiers[tier], config.data_dir) for tier in config.configured_tiers()}
