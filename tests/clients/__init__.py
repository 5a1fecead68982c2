"""`make test-clients`: the real Claude Code and Codex CLIs through a running daari against a fake upstream."""
