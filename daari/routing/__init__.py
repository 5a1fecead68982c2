"""Routing: normalization, agent-turn detection, the heuristic classifier, tier plans and confidence."""
