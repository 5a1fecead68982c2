"""Local model tiers as agents need them: tool calls written as text made real, and requests fitted to the
model's context window (docs/agents.md, "Local models that call tools")."""
