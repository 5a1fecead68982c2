"""L1 semantic cache rules: what is embedded, the exact lookup context, and the verifier's verdicts."""
