"""Executors: what answers a tier (the embedded model, OpenAI-compatible, Ollama, Anthropic upstreams)."""
