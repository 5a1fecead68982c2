"""Agent sessions across tiers (docs/agents.md, "Sessions"): which session a request belongs to, where its
provider prompt cache is warm and what moving it would cost, and which provider signed each thinking block."""
