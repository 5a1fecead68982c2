"""Tool-native tiers (L2-dev, Lt, CCS): command patterns, commands.yaml, the sandbox policy. Pure functions."""
