"""daari: a local LLM proxy for coding agents (OpenAI- and Anthropic-compatible)."""

__version__ = "0.1.0"
