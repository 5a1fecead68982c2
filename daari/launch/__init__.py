"""`daari code`: one command from nothing to a coding agent running through daari (docs/agents.md)."""
